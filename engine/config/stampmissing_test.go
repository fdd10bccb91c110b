package config

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestStamperMissingPaths checks that a Stamper that skips the stat of
// paths known missing still sees each of them appear: in an old ancestor
// (trusted), one directory deeper, with the ancestor's mtime restored
// (only its ctime shows the change), and after the ancestor is replaced.
// Every stamp equals a fresh Stamp's bytes.
func TestStamperMissingPaths(t *testing.T) {
	home := t.TempDir()
	old := time.Now().Add(-time.Hour)
	age := func(paths ...string) {
		t.Helper()
		for _, p := range paths {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	o := Options{Home: home, Sources: []string{SourceClaudeCode, SourceCursor}}
	var st Stamper
	check := func(step string, same bool, prev string) string {
		t.Helper()
		got := st.Stamp(o)
		if want := Stamp(o); got != want {
			t.Fatalf("%s: Stamper gives %q, a fresh Stamp %q", step, got, want)
		}
		if (got == prev) != same {
			t.Errorf("%s: same = %v, want %v", step, got == prev, same)
		}
		return got
	}

	// The home dir is recent: nothing is remembered yet.
	prev := check("recent home", true, st.Stamp(o))
	if len(st.missing) != 0 {
		t.Errorf("paths under a dir changed within racyWindow were remembered: %v", st.missing)
	}
	age(home)
	prev = check("old home", true, prev)
	prev = check("remembered", true, prev)
	if runtime.GOOS == "linux" && len(st.missing) != 2 {
		t.Errorf("remembered %d missing paths, want 2 (.claude.json, .cursor/mcp.json)", len(st.missing))
	}

	write(t, filepath.Join(home, ".claude.json"), "{}", old)
	prev = check("file created in the ancestor", false, prev)

	cursor := filepath.Join(home, ".cursor")
	mkdir(t, cursor)
	prev = check("dir created on the way", true, prev) // .cursor/mcp.json is still missing
	age(home, cursor)
	prev = check("aged", true, prev)
	prev = check("remembered under the new dir", true, prev)
	fi, err := os.Stat(cursor)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the clock tick of the remembered ctime
	write(t, filepath.Join(cursor, "mcp.json"), "{}", old)
	if err := os.Chtimes(cursor, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	prev = check("file created, ancestor's mtime restored", false, prev)

	// The ancestor replaced by another dir with the same times.
	if err := os.Remove(filepath.Join(cursor, "mcp.json")); err != nil {
		t.Fatal(err)
	}
	age(home, cursor)
	prev = check("removed", false, prev)
	prev = check("remembered again", true, prev)
	other := filepath.Join(t.TempDir(), "cursor")
	mkdir(t, other)
	write(t, filepath.Join(other, "mcp.json"), "{}", old)
	age(other)
	if err := os.RemoveAll(cursor); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, cursor); err != nil {
		t.Fatal(err)
	}
	age(home, cursor)
	check("ancestor replaced", false, prev)
}
