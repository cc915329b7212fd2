module github.com/seed32e55400/retries/bench

go 1.26.0

require (
	github.com/avast/retry-go/v4 v4.7.0
	github.com/avast/retry-go/v5 v5.1.1
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/cenkalti/backoff/v7 v7.0.3
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/seed32e55400/retries v0.4.0
	github.com/sethvargo/go-retry v0.5.0
	golang.org/x/mod v0.43.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
)
