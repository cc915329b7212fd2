package feed_test

import (
	"strings"
	"testing"

	"github.com/seed32e55400/retries/feed"
)

// TestConfigValidate: Validate refuses what New refuses, with the same
// error, and makes nothing.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  feed.Config
		want string // a part of the error; "" for none
	}{
		{feed.Config{URL: "http://localhost:8080"}, ""},
		{feed.Config{URLs: []string{"https://a:443", "http://b"}}, ""},
		{feed.Config{}, `URL "": want http://HOST[:PORT]`},
		{feed.Config{URL: "localhost:8080"}, `URL "localhost:8080"`},
		{feed.Config{URLs: []string{"http://a", "ftp://b"}}, `URL "ftp://b"`},
		{feed.Config{URL: "http://a", BreakerWindow: -1}, "must not be negative"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Validate() = %v, want %q", tc.cfg, err, tc.want)
		}
		c, nerr := feed.New(tc.cfg)
		if c != nil {
			c.Close()
		}
		if (err == nil) != (nerr == nil) || err != nil && err.Error() != nerr.Error() {
			t.Errorf("%+v: New = %v, Validate = %v", tc.cfg, nerr, err)
		}
	}
}
