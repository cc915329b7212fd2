// Command modproxy writes a Go module proxy holding this repository's modules
// at their release version, made from a git revision as the module mirror
// makes them (git archive, nested modules left out), in the layout that
// GOPROXY=file://DIR reads: DIR/MODULE/@v/{list,VERSION.info,.mod,.zip}.
//
//	go run ./cmd/modproxy -o /tmp/proxy        # prints the version, v0.4.0
//
// The modules are those go.work uses. The version is the one the modules
// require of each other, which must be one version for all; a module that
// requires another at a different version, or holds a replace directive
// (which a user's build ignores), is refused with exit status 1. .ci/install
// then does what a user outside the repository does: go get from this proxy
// alone, build and run.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	out := flag.String("o", "", "the proxy's `directory` (required; made if missing)")
	rev := flag.String("rev", "HEAD", "the git `revision` the modules are made from")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -o DIR [-rev REV]")
		os.Exit(2)
	}
	version, err := run(*out, *rev)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
	fmt.Println(version)
}

// mod is one module of the workspace: its path and its directory relative
// to the repository's root ("" for the root).
type mod struct {
	path, dir string
	file      *modfile.File
	data      []byte
}

func run(out, rev string) (string, error) {
	root, err := git("", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	root = strings.TrimSpace(root)
	mods, err := workspace(root, rev)
	if err != nil {
		return "", err
	}
	version, err := releaseVersion(mods)
	if err != nil {
		return "", err
	}
	when, err := git(root, "log", "-1", "--format=%cI", rev)
	if err != nil {
		return "", err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(when))
	if err != nil {
		return "", err
	}
	for _, m := range mods {
		if err := write(out, root, rev, m, version, t.UTC()); err != nil {
			return "", fmt.Errorf("%s: %w", m.path, err)
		}
	}
	return version, nil
}

// workspace reads go.work's modules and their go.mod files at rev.
func workspace(root, rev string) ([]mod, error) {
	data, err := git(root, "show", rev+":go.work")
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", []byte(data), nil)
	if err != nil {
		return nil, err
	}
	var mods []mod
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if dir == "." {
			dir = ""
		}
		name := path.Join(dir, "go.mod")
		data, err := git(root, "show", rev+":"+name)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, []byte(data), nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s: no module line", name)
		}
		if len(f.Replace) > 0 {
			return nil, fmt.Errorf("%s: replaces %s; a user's build ignores a dependency's replace directives, so a module must build without them",
				name, f.Replace[0].Old.Path)
		}
		mods = append(mods, mod{path: f.Module.Mod.Path, dir: dir, file: f, data: []byte(data)})
	}
	if len(mods) == 0 {
		return nil, errors.New("go.work uses no module")
	}
	return mods, nil
}

// releaseVersion is the one version at which the modules require each
// other.
func releaseVersion(mods []mod) (string, error) {
	ours := map[string]bool{}
	for _, m := range mods {
		ours[m.path] = true
	}
	version, by := "", ""
	for _, m := range mods {
		for _, r := range m.file.Require {
			if !ours[r.Mod.Path] {
				continue
			}
			switch {
			case version == "":
				version, by = r.Mod.Version, m.path
			case r.Mod.Version != version:
				return "", fmt.Errorf("%s requires %s %s, but %s requires this repository's modules at %s: one release, one version",
					m.path, r.Mod.Path, r.Mod.Version, by, version)
			}
		}
	}
	if version == "" {
		return "", errors.New("no module requires another: no release version to read")
	}
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return "", fmt.Errorf("%s is not a canonical semantic version", version)
	}
	return version, nil
}

// write adds module m at version to the proxy in out.
func write(out, root, rev string, m mod, version string, t time.Time) error {
	esc, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var z bytes.Buffer
	if err := zip.CreateFromVCS(&z, module.Version{Path: m.path, Version: version}, root, rev, m.dir); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t})
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{version + ".zip", z.Bytes()},
		{version + ".mod", m.data},
		{version + ".info", info},
		{"list", []byte(version + "\n")},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "modproxy: %s %s (%d bytes zipped)\n", m.path, version, z.Len())
	return nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
