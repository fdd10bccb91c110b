//go:build unix

package config

import (
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// TestLoadFIFO checks that a FIFO named *.json is refused at once instead of
// blocking the load until a writer appears.
func TestLoadFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pipe.json")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	got := Load(Options{Dir: dir, LookPath: noLookPath})
	want := []Problem{{File: path, Reason: "not a regular file"}}
	if !reflect.DeepEqual(got.Problems, want) {
		t.Errorf("Problems = %q, want %q", got.Problems, want)
	}
	if Stamp(Options{Dir: dir}) == "" {
		t.Error("empty stamp")
	}
}
