module github.com/seed32e55400/retries

go 1.25

require github.com/cenkalti/backoff/v4 v4.3.0
