package main

import (
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

func parse(t *testing.T, text string) mod {
	t.Helper()
	f, err := modfile.Parse("go.mod", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	return mod{path: f.Module.Mod.Path, file: f}
}

// TestReleaseVersion: the modules' one version is read from what they
// require of each other; two versions, or none, are refused, naming the
// cause.
func TestReleaseVersion(t *testing.T) {
	root := parse(t, "module example.com/r\nrequire other.org/x v1.0.0\n")
	kafka := func(v string) mod { return parse(t, "module example.com/r/kafka\nrequire example.com/r "+v+"\n") }
	otel := func(v string) mod {
		return parse(t, "module example.com/r/otel\nrequire (\n\texample.com/r "+v+"\n\texample.com/r/kafka "+v+"\n)\n")
	}
	for _, tc := range []struct {
		mods []mod
		want string // the version, or a part of the error
	}{
		{[]mod{root, kafka("v0.4.0"), otel("v0.4.0")}, "v0.4.0"},
		{[]mod{root, kafka("v0.4.0"), otel("v0.3.0")}, "one release, one version"},
		{[]mod{root}, "no module requires another"},
	} {
		got, err := releaseVersion(tc.mods)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("releaseVersion = %q, want %q", got, tc.want)
		}
	}
}
