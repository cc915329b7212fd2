package main

import (
	"regexp"
	"testing"
)

// TestVersion: version prints one line, the binary's module version ("(devel)"
// in a clone; .ci/install checks the release's after go install), and refuses
// arguments with exit 2.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, "version")
	if code != exitOK || stderr != "" || !regexp.MustCompile(`^retries (v\d+\.\d+\.\d+\S*|\(devel\))\n$`).MatchString(stdout) {
		t.Errorf("run(version) = %d, stdout %q, stderr %q; want 0 and one line", code, stdout, stderr)
	}
	code, _, stderr = runCmd(t, "version", "now")
	if code != exitUsage || !regexp.MustCompile(`unexpected argument "now"`).MatchString(stderr) {
		t.Errorf("run(version now) = %d, stderr %q; want 2 naming the argument", code, stderr)
	}
}
