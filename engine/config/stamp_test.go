package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStamp checks RLD-1: the stamp is stable while nothing changes and
// changes when a config file is added, modified (size or mtime), or
// removed, or when MCP_SERVERS_CONFIG changes.
func TestStamp(t *testing.T) {
	t.Run("Stamp", func(t *testing.T) { testStamp(t, Stamp) })
	t.Run("Stamper", func(t *testing.T) { testStamp(t, new(Stamper).Stamp) })
}

func testStamp(t *testing.T, Stamp func(Options) string) {
	root := t.TempDir()
	dir := filepath.Join(root, "mcps")
	extra := filepath.Join(root, "extra.json")
	o := Options{Dir: dir, Extra: extra}
	old := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

	steps := []struct {
		name   string
		change func(t *testing.T)
		same   bool
	}{
		{"nothing", func(t *testing.T) {}, true},
		{"dir created", func(t *testing.T) { mkdir(t, dir) }, false},
		{"unchanged", func(t *testing.T) {}, true},
		{"file added", func(t *testing.T) { write(t, filepath.Join(dir, "a.json"), "{}", old) }, false},
		{"file grown", func(t *testing.T) { write(t, filepath.Join(dir, "a.json"), "{ }", old) }, false},
		{"same size, new mtime", func(t *testing.T) {
			write(t, filepath.Join(dir, "a.json"), "[ ]", old.Add(time.Second))
		}, false},
		{"re-stat", func(t *testing.T) {}, true},
		{"extra added", func(t *testing.T) { write(t, extra, "{}", old) }, false},
		{"extra modified", func(t *testing.T) { write(t, extra, "{}", old.Add(time.Minute)) }, false},
		{"file removed", func(t *testing.T) {
			if err := os.Remove(filepath.Join(dir, "a.json")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"stable again", func(t *testing.T) {}, true},
	}
	prev := Stamp(o)
	for _, s := range steps {
		s.change(t)
		got := Stamp(o)
		if (got == prev) != s.same {
			t.Errorf("%s: stamp %s after %s; same = %v, want %v", s.name, got, prev, got == prev, s.same)
		}
		prev = got
	}
	if Stamp(Options{Dir: dir}) == Stamp(Options{Dir: dir, Extra: extra}) {
		t.Error("Extra does not count in the stamp")
	}
}

// TestStampModifiedInPlace checks that rewriting a file in place with the
// same size but a different mtime changes the stamp, even though the dir's
// own mtime does not change.
func TestStampModifiedInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	old := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	write(t, path, "{}", old)
	before := Stamp(Options{Dir: dir})
	write(t, path, "[]", old.Add(time.Nanosecond*1000))
	if after := Stamp(Options{Dir: dir}); after == before {
		t.Error("stamp unchanged after an in-place edit")
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

// write sets path's content and mtime.
func write(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// TestStamperListings checks when a Stamper reuses a dir's listing: only
// while the dir's stat is unchanged and its mtime was older than
// racyWindow when listed. An entry added in the same timestamp tick as
// the listing (simulated by restoring the dir's mtime) is still seen while
// the dir is recent; once the listing is trusted, only the dir's stat
// decides.
func TestStamperListings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcps")
	mkdir(t, dir)
	o := Options{Dir: dir}
	addKeepingMtime := func(name string) {
		t.Helper()
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name), "{}", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
		if err := os.Chtimes(dir, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}

	var st Stamper
	before := st.Stamp(o)
	addKeepingMtime("a.json") // the dir is recent: its listing is not trusted
	if got := st.Stamp(o); got == before || got != Stamp(o) {
		t.Errorf("a file added to a recent dir without an mtime change was missed: %q", got)
	}

	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	before = st.Stamp(o) // trusted listing
	write(t, filepath.Join(dir, "b.json"), "{}", old)
	if got := st.Stamp(o); got == before || got != Stamp(o) {
		t.Errorf("a file added to an old dir was missed: %q", got)
	}
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	before = st.Stamp(o)
	addKeepingMtime("c.json") // a change no stat of the dir shows: the listing is reused
	if got := st.Stamp(o); got != before {
		t.Errorf("a trusted listing was read again although the dir's stat is unchanged")
	}
	if Stamp(o) == before {
		t.Errorf("a fresh Stamp missed c.json")
	}
}
