package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// runVersion prints the version the binary was built at: the module's
// version when installed with go install …@VERSION, "(devel)" when built in
// a clone.
func runVersion(args []string, stdout io.Writer) error {
	pos, err := parseFlags(newFlagSet("version"), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("version: unexpected argument %q", pos[0])
	}
	fmt.Fprintln(stdout, "retries", buildVersion())
	return nil
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
