package control

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Package returns the application package at path as the deploy API
// takes it: a .zip file as it is, or a directory zipped with its files'
// paths relative to it, so that services.xml is at the archive's root.
// Either must hold services.xml there; hidden files and directories (a
// name starting with ".") are left out of a directory's archive.
func Package(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var b []byte
	if fi.IsDir() {
		b, err = zipDir(path)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("control: %s is neither a directory nor a zip archive: %w", path, err)
	}
	for _, f := range z.File {
		if f.Name == "services.xml" {
			return b, nil
		}
	}
	return nil, fmt.Errorf("control: %s has no services.xml at its root", path)
}

// zipDir zips dir's files with paths relative to it.
func zipDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		out, err := w.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = io.Copy(out, f)
		return err
	})
	if err := errors.Join(err, w.Close()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
