package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var testKey = bytes.Repeat([]byte{0x5a}, 32)

// clock is a settable clock for Meta.Used.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newStore opens a store in a fresh directory with a settable clock at t0.
func newStore(t *testing.T, caps Caps) (*Store, *clock) {
	t.Helper()
	return newStoreIn(t, filepath.Join(t.TempDir(), "sessions"), caps)
}

func newStoreIn(t *testing.T, dir string, caps Caps) (*Store, *clock) {
	t.Helper()
	s, err := Open(dir, testKey, caps, zerolog.Nop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	c := &clock{t: t0}
	s.now = c.now
	return s, c
}

// put stores data as the snapshot of (principal, session) at call.
func put(t *testing.T, s *Store, principal, session string, call int64, data []byte) Meta {
	t.Helper()
	w, err := s.Create(principal, session)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer w.Abort()
	if _, err := w.Write(data); err != nil {
		t.Fatalf("Write: %v", err)
	}
	m, err := w.Commit(Meta{Call: call, Taken: t0.Add(time.Duration(call) * time.Second), Names: 1})
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return m
}

// get opens and reads the snapshot of (principal, session); nil when none.
func get(t *testing.T, s *Store, principal, session string) ([]byte, Meta) {
	t.Helper()
	r, err := s.Open(principal, session)
	if err != nil {
		t.Fatalf("Open(%q, %q): %v", principal, session, err)
	}
	if r == nil {
		return nil, Meta{}
	}
	defer r.Close()
	return readAll(t, r), r.Meta()
}

func readAll(t *testing.T, r *Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return b
}

// files lists the names in dir, sorted, without lock files.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), extLock) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

func TestRoundTrip(t *testing.T) {
	s, _ := newStore(t, Caps{})
	if r, err := s.Open("alice", "main"); r != nil || err != nil {
		t.Fatalf("Open before any commit = %v, %v; want nil, nil", r, err)
	}
	w, err := s.Create("alice", "main")
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i, piece := range []string{"pickled ", "", "state ", strings.Repeat("x", 100_000), " end"} {
		n, err := w.Write([]byte(piece))
		if err != nil || n != len(piece) {
			t.Fatalf("Write %d = %d, %v", i, n, err)
		}
		want = append(want, piece...)
	}
	if got := w.Size(); got != int64(len(want)) {
		t.Fatalf("Size = %d, want %d", got, len(want))
	}
	taken := time.Date(2026, 3, 1, 11, 59, 0, 123456789, time.FixedZone("x", 3600))
	in := Meta{Principal: "ignored", Session: "ignored", Bytes: 1, Call: 7, LastCall: 3, Taken: taken, Names: 4, Files: 2,
		Left: []string{"fh (open file)"}, Image: "python 3.12 / img@sha256:abc", MAC: "ignored"}
	stored, err := w.Commit(in)
	if err != nil {
		t.Fatal(err)
	}
	w.Abort() // no-op after Commit

	r, err := s.Open("alice", "main")
	if err != nil || r == nil {
		t.Fatalf("Open = %v, %v", r, err)
	}
	defer r.Close()
	if got := readAll(t, r); !bytes.Equal(got, want) {
		t.Fatalf("data differs: got %d bytes, want %d", len(got), len(want))
	}
	m := r.Meta()
	checks := []struct {
		name      string
		got, want any
	}{
		{"Principal", m.Principal, "alice"},
		{"Session", m.Session, "main"},
		{"Call", m.Call, int64(7)},
		{"LastCall", m.LastCall, int64(7)}, // raised to Call
		{"Taken", m.Taken.Equal(taken), true},
		{"Bytes", m.Bytes, int64(len(want))},
		{"Size", r.Size(), int64(len(want))},
		{"Names", m.Names, 4},
		{"Files", m.Files, 2},
		{"Left", strings.Join(m.Left, ","), "fh (open file)"},
		{"Image", m.Image, "python 3.12 / img@sha256:abc"},
		{"Used", m.Used.Equal(t0), true},
		{"MAC", m.MAC, stored.MAC},
		{"MAC length", len(m.MAC), 64},
		{"stored Bytes", stored.Bytes, int64(len(want))},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	reads := []struct {
		off     int64
		n       int
		want    string
		wantErr error
	}{
		{0, 8, "pickled ", nil},
		{8, 6, "state ", nil},
		{int64(len(want)) - 4, 4, " end", nil},
		{int64(len(want)) - 2, 10, "nd", io.EOF},
		{int64(len(want)), 1, "", io.EOF},
		{int64(len(want)) + 5, 1, "", io.EOF},
	}
	for _, c := range reads {
		p := make([]byte, c.n)
		n, err := r.ReadAt(p, c.off)
		if got := string(p[:n]); got != c.want || !errors.Is(err, c.wantErr) {
			t.Errorf("ReadAt(%d, %d) = %q, %v; want %q, %v", c.off, c.n, got, err, c.want, c.wantErr)
		}
	}

	// Layout: only hex-named 0600 files in a 0700 directory.
	if fi, err := os.Stat(s.dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	id := idOf("alice", "main")
	if got, want := files(t, s.dir), []string{id + extMeta, id + extSnap}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	for _, ext := range []string{extMeta, extSnap, extLock} {
		if fi, err := os.Stat(s.path(id, ext)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, %v; want 0600", ext, fi.Mode().Perm(), err)
		}
	}
}

func TestSessionNamesStayOutOfPaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sessions")
	s, _ := newStoreIn(t, dir, Caps{})
	sessions := []string{"../escape", "a/b", "", "..", "/etc/passwd", "nul\x00inside", strings.Repeat("long", 200)}
	for i, name := range sessions {
		put(t, s, "p", name, int64(i), []byte(name+"!"))
	}
	for _, name := range sessions {
		if got, _ := get(t, s, "p", name); string(got) != name+"!" {
			t.Errorf("session %q: got %q", name, got)
		}
	}
	if got := files(t, root); !slices.Equal(got, []string{"sessions"}) {
		t.Errorf("files beside the store = %v, want only sessions", got)
	}
	for _, name := range files(t, dir) {
		if !pairRe.MatchString(name) {
			t.Errorf("unexpected file %q", name)
		}
	}
	if _, err := s.Create("a\x00b", "x"); err == nil {
		t.Error("Create with a NUL in the principal succeeded")
	}
}

func TestOverCap(t *testing.T) {
	s, _ := newStore(t, Caps{PerSession: 10})
	w, err := s.Create("", "big")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write([]byte("123456")); n != 6 || err != nil {
		t.Fatalf("first Write = %d, %v", n, err)
	}
	if n, err := w.Write([]byte("789ab")); n != 0 || !errors.Is(err, ErrOverCap) {
		t.Fatalf("second Write = %d, %v; want 0, ErrOverCap", n, err)
	} else if !strings.Contains(err.Error(), "MCP_BRIDGE_SNAPSHOT_MAX") || !strings.Contains(err.Error(), "10") {
		t.Errorf("error %q names neither the variable nor the figure", err)
	}
	if got := files(t, s.dir); len(got) != 0 {
		t.Errorf("files after going over = %v, want none", got)
	}
	if _, err := w.Write([]byte("1")); !errors.Is(err, ErrOverCap) {
		t.Errorf("later Write = %v, want ErrOverCap", err)
	}
	if _, err := w.Commit(Meta{Call: 1}); !errors.Is(err, ErrOverCap) {
		t.Errorf("Commit = %v, want ErrOverCap", err)
	}
	w.Abort()
	if got, _ := get(t, s, "", "big"); got != nil {
		t.Errorf("a snapshot was stored: %q", got)
	}

	// Exactly the cap fits.
	put(t, s, "", "fits", 1, []byte("0123456789"))
}

// rewriteSidecar applies edit to id's parsed sidecar.
func rewriteSidecar(t *testing.T, s *Store, id string, edit func(m map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(s.path(id, extMeta))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path(id, extMeta), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTampering(t *testing.T) {
	data := []byte("the pickled state of alice's session")
	alice, bob := idOf("alice", "s"), idOf("bob", "s")
	cases := []struct {
		name   string
		open   string // the principal that opens "s"
		tamper func(t *testing.T, s *Store)
	}{
		{"flip a data byte", "alice", func(t *testing.T, s *Store) {
			b, _ := os.ReadFile(s.path(alice, extSnap))
			b[3] ^= 1
			os.WriteFile(s.path(alice, extSnap), b, 0o600)
		}},
		{"truncate the data", "alice", func(t *testing.T, s *Store) {
			os.Truncate(s.path(alice, extSnap), int64(len(data)-1))
		}},
		{"truncate data and Bytes", "alice", func(t *testing.T, s *Store) {
			os.Truncate(s.path(alice, extSnap), 5)
			rewriteSidecar(t, s, alice, func(m map[string]any) { m["bytes"] = 5 })
		}},
		{"extend the data", "alice", func(t *testing.T, s *Store) {
			f, _ := os.OpenFile(s.path(alice, extSnap), os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte("x"))
			f.Close()
		}},
		{"edit the sidecar's Call", "alice", func(t *testing.T, s *Store) {
			rewriteSidecar(t, s, alice, func(m map[string]any) { m["call"] = 99 })
		}},
		{"edit the sidecar's Taken", "alice", func(t *testing.T, s *Store) {
			rewriteSidecar(t, s, alice, func(m map[string]any) { m["taken"] = t0.Add(time.Hour) })
		}},
		{"sidecar not JSON", "alice", func(t *testing.T, s *Store) {
			os.WriteFile(s.path(alice, extMeta), []byte("{not json"), 0o600)
		}},
		{"malformed MAC", "alice", func(t *testing.T, s *Store) {
			rewriteSidecar(t, s, alice, func(m map[string]any) { m["mac"] = "zz" })
		}},
		{"data replaced by a symlink", "alice", func(t *testing.T, s *Store) {
			other := filepath.Join(t.TempDir(), "other")
			os.WriteFile(other, data, 0o600)
			os.Remove(s.path(alice, extSnap))
			os.Symlink(other, s.path(alice, extSnap))
		}},
		{"alice's pair copied to bob's names", "bob", func(t *testing.T, s *Store) {
			copyFile(t, s.path(alice, extSnap), s.path(bob, extSnap))
			copyFile(t, s.path(alice, extMeta), s.path(bob, extMeta))
		}},
		{"alice's pair copied to bob's names, sidecar renamed to bob", "bob", func(t *testing.T, s *Store) {
			copyFile(t, s.path(alice, extSnap), s.path(bob, extSnap))
			copyFile(t, s.path(alice, extMeta), s.path(bob, extMeta))
			rewriteSidecar(t, s, bob, func(m map[string]any) { m["principal"] = "bob" })
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newStore(t, Caps{})
			put(t, s, "alice", "s", 3, data)
			c.tamper(t, s)
			r, err := s.Open(c.open, "s")
			if r != nil || !errors.Is(err, ErrTampered) {
				t.Fatalf("Open = %v, %v; want ErrTampered", r, err)
			}
			id := idOf(c.open, "s")
			for _, ext := range []string{extSnap, extMeta} {
				if _, err := os.Lstat(s.path(id, ext)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still there after ErrTampered (%v)", ext, err)
				}
			}
			if r, err := s.Open(c.open, "s"); r != nil || err != nil {
				t.Errorf("second Open = %v, %v; want nil, nil", r, err)
			}
			if c.open != "alice" {
				if got, _ := get(t, s, "alice", "s"); !bytes.Equal(got, data) {
					t.Errorf("alice's snapshot was harmed: %q", got)
				}
			}
		})
	}
}

// LastCall and Used are outside the MAC: editing them is not tampering.
func TestUnsealedFieldsMayChange(t *testing.T) {
	s, _ := newStore(t, Caps{})
	put(t, s, "alice", "s", 3, []byte("abc"))
	rewriteSidecar(t, s, idOf("alice", "s"), func(m map[string]any) {
		m["lastCall"] = 42
		m["used"] = t0.Add(-time.Hour)
	})
	got, m := get(t, s, "alice", "s")
	if string(got) != "abc" || m.LastCall != 42 {
		t.Errorf("got %q, LastCall %d; want abc, 42", got, m.LastCall)
	}
}

// A rollback to an older genuine snapshot of the same session verifies; the
// package doc says so.
func TestRollbackIsNotDetected(t *testing.T) {
	s, _ := newStore(t, Caps{})
	id := idOf("alice", "s")
	put(t, s, "alice", "s", 1, []byte("old"))
	saved := t.TempDir()
	copyFile(t, s.path(id, extSnap), filepath.Join(saved, "snap"))
	copyFile(t, s.path(id, extMeta), filepath.Join(saved, "json"))
	put(t, s, "alice", "s", 2, []byte("new"))
	copyFile(t, filepath.Join(saved, "snap"), s.path(id, extSnap))
	copyFile(t, filepath.Join(saved, "json"), s.path(id, extMeta))
	if got, m := get(t, s, "alice", "s"); string(got) != "old" || m.Call != 1 {
		t.Errorf("got %q call %d; want the old snapshot", got, m.Call)
	}
}

func TestPrincipalIsolation(t *testing.T) {
	s, _ := newStore(t, Caps{})
	cases := []struct{ principal, data string }{
		{"alice", "alice's state"},
		{"bob", "bob's state"},
		{"", "stdio state"},
	}
	ids := map[string]bool{}
	for i, c := range cases {
		put(t, s, c.principal, "main", int64(i+1), []byte(c.data))
		ids[idOf(c.principal, "main")] = true
	}
	if len(ids) != len(cases) {
		t.Fatalf("ids collide: %v", ids)
	}
	for _, c := range cases {
		got, m := get(t, s, c.principal, "main")
		if string(got) != c.data || m.Principal != c.principal {
			t.Errorf("principal %q: got %q (principal %q), want %q", c.principal, got, m.Principal, c.data)
		}
	}
	if _, ok := s.Stat("carol", "main"); ok {
		t.Error("carol sees a snapshot")
	}
	if r, err := s.Open("carol", "main"); r != nil || err != nil {
		t.Errorf("carol's Open = %v, %v; want nil, nil", r, err)
	}
}

func TestReaderSurvivesReplacement(t *testing.T) {
	s, _ := newStore(t, Caps{})
	put(t, s, "p", "s", 1, []byte("version one"))
	r, err := s.Open("p", "s")
	if err != nil || r == nil {
		t.Fatalf("Open = %v, %v", r, err)
	}
	defer r.Close()
	put(t, s, "p", "s", 2, []byte("version two, longer"))
	if got := readAll(t, r); string(got) != "version one" {
		t.Errorf("open reader reads %q, want version one", got)
	}
	if got, m := get(t, s, "p", "s"); string(got) != "version two, longer" || m.Call != 2 {
		t.Errorf("new Open reads %q call %d", got, m.Call)
	}
	if err := s.Delete("p", "s"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); string(got) != "version one" {
		t.Errorf("after Delete the reader reads %q", got)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestTotalEvictsLeastRecentlyUsed(t *testing.T) {
	data := bytes.Repeat([]byte("d"), 100)
	cases := []struct {
		name string
		// steps run in order; "+x" commits x, "?x" opens x, at successive
		// clock ticks (a tick of -1 hour before the step when prefixed "<").
		steps []string
		total int64
		want  []string // sessions left
	}{
		{"oldest goes", []string{"+a", "+b", "+c"}, 250, []string{"b", "c"}},
		{"open refreshes", []string{"+a", "+b", "?a", "+c"}, 250, []string{"a", "c"}},
		{"all fit", []string{"+a", "+b", "+c"}, 300, []string{"a", "b", "c"}},
		{"never the just committed", []string{"+a", "+b", "<+c"}, 150, []string{"c"}},
		{"just committed over the total alone", []string{"+a", "+b", "+c"}, 50, []string{"c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, clk := newStore(t, Caps{Total: c.total})
			now := t0
			for i, step := range c.steps {
				now = now.Add(time.Minute)
				if strings.HasPrefix(step, "<") {
					step = step[1:]
					now = t0.Add(-time.Hour)
				}
				clk.set(now)
				switch step[0] {
				case '+':
					put(t, s, "p"+step[1:], step[1:], int64(i+1), data)
				case '?':
					get(t, s, "p"+step[1:], step[1:])
				}
			}
			var left []string
			for _, x := range []string{"a", "b", "c"} {
				if _, ok := s.Stat("p"+x, x); ok {
					left = append(left, x)
				}
			}
			if !slices.Equal(left, c.want) {
				t.Errorf("left = %v, want %v", left, c.want)
			}
			if n, b := s.Usage(); n != len(c.want) || b != int64(len(c.want)*len(data)) {
				t.Errorf("Usage = %d, %d", n, b)
			}
		})
	}
}

func TestRetentionSweep(t *testing.T) {
	cases := []struct {
		name      string
		retention time.Duration
		sweepAt   time.Duration // after t0
		want      []string
	}{
		{"old one goes", 7 * 24 * time.Hour, 8 * 24 * time.Hour, []string{"new"}},
		{"both go", 7 * 24 * time.Hour, 20 * 24 * time.Hour, nil},
		{"none yet", 7 * 24 * time.Hour, 24 * time.Hour, []string{"new", "old"}},
		{"zero keeps forever", 0, 1000 * 24 * time.Hour, []string{"new", "old"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, clk := newStore(t, Caps{Retention: c.retention})
			put(t, s, "p", "old", 1, []byte("o"))
			clk.set(t0.Add(6 * 24 * time.Hour))
			put(t, s, "p", "new", 2, []byte("n"))
			s.Sweep(t0.Add(c.sweepAt))
			var left []string
			for _, x := range []string{"new", "old"} {
				if got, _ := get(t, s, "p", x); got != nil {
					left = append(left, x)
				}
			}
			if !slices.Equal(left, c.want) {
				t.Errorf("left = %v, want %v", left, c.want)
			}
		})
	}
}

func TestSweepTempAndForeignFiles(t *testing.T) {
	s, _ := newStore(t, Caps{})
	w, err := s.Create("p", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.Write([]byte("partial"))
	var tmp string
	for _, name := range files(t, s.dir) {
		if tempRe.MatchString(name) {
			tmp = name
		}
	}
	if tmp == "" {
		t.Fatalf("no temp file among %v", files(t, s.dir))
	}

	old := time.Now().Add(-2 * time.Hour)
	foreign := []string{"notes.txt", "abc.snap", strings.Repeat("A", 32) + ".json", strings.Repeat("0", 32) + ".bak"}
	for _, name := range foreign {
		p := filepath.Join(s.dir, name)
		os.WriteFile(p, []byte("{not ours"), 0o600)
		os.Chtimes(p, old, old)
	}
	// A broken pair and half pairs, which Sweep removes.
	put(t, s, "p", "broken", 1, []byte("b"))
	os.WriteFile(s.path(idOf("p", "broken"), extMeta), []byte("garbage"), 0o600)
	put(t, s, "p", "nometa", 1, []byte("b"))
	os.Remove(s.path(idOf("p", "nometa"), extMeta))
	put(t, s, "p", "nodata", 1, []byte("b"))
	os.Remove(s.path(idOf("p", "nodata"), extSnap))
	put(t, s, "p", "kept", 1, []byte("k"))

	s.Sweep(time.Now())
	if _, err := os.Stat(filepath.Join(s.dir, tmp)); err != nil {
		t.Errorf("a fresh temp file was swept: %v", err)
	}
	os.Chtimes(filepath.Join(s.dir, tmp), old, old)
	s.Sweep(time.Now())
	if _, err := os.Stat(filepath.Join(s.dir, tmp)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an hour-old temp file survived: %v", err)
	}
	kept := idOf("p", "kept")
	want := append(slices.Clone(foreign), kept+extMeta, kept+extSnap)
	sort.Strings(want)
	if got := files(t, s.dir); !slices.Equal(got, want) {
		t.Errorf("files = %v\nwant %v", got, want)
	}
	if _, err := w.Commit(Meta{Call: 1}); err == nil {
		t.Error("Commit of a swept temp file succeeded")
	}
}

func TestDelete(t *testing.T) {
	s, _ := newStore(t, Caps{})
	put(t, s, "p", "s", 1, []byte("x"))
	put(t, s, "p", "other", 1, []byte("y"))
	for i := range 2 { // the second time there is nothing to delete
		if err := s.Delete("p", "s"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if _, ok := s.Stat("p", "s"); ok {
		t.Error("Stat after Delete found it")
	}
	if r, err := s.Open("p", "s"); r != nil || err != nil {
		t.Errorf("Open after Delete = %v, %v", r, err)
	}
	if got, _ := get(t, s, "p", "other"); string(got) != "y" {
		t.Errorf("Delete harmed another session: %q", got)
	}
}

func TestSetLastCall(t *testing.T) {
	s, _ := newStore(t, Caps{})
	if err := s.SetLastCall("p", "none", 9); err != nil {
		t.Fatalf("SetLastCall without a snapshot: %v", err)
	}
	if _, ok := s.Stat("p", "none"); ok {
		t.Fatal("SetLastCall made a sidecar")
	}
	put(t, s, "p", "s", 5, []byte("x"))
	steps := []struct {
		n, want int64
	}{
		{7, 7},
		{6, 7}, // never lowered
		{7, 7},
		{12, 12},
	}
	for _, c := range steps {
		if err := s.SetLastCall("p", "s", c.n); err != nil {
			t.Fatal(err)
		}
		if m, _ := s.Stat("p", "s"); m.LastCall != c.want {
			t.Errorf("after SetLastCall(%d) LastCall = %d, want %d", c.n, m.LastCall, c.want)
		}
	}
	if got, m := get(t, s, "p", "s"); string(got) != "x" || m.LastCall != 12 || m.Call != 5 {
		t.Errorf("Open after SetLastCall = %q, call %d, last %d", got, m.Call, m.LastCall)
	}
	// A snapshot committed after a later call started keeps that call.
	if m := put(t, s, "p", "s", 8, []byte("y")); m.LastCall != 12 {
		t.Errorf("a commit of call 8 after SetLastCall(12): LastCall = %d, want 12", m.LastCall)
	}
}

func TestStat(t *testing.T) {
	s, clk := newStore(t, Caps{})
	if _, ok := s.Stat("p", "s"); ok {
		t.Fatal("Stat of nothing = true")
	}
	put(t, s, "p", "s", 4, []byte("abcd"))
	m, ok := s.Stat("p", "s")
	if !ok || m.Call != 4 || m.Bytes != 4 || m.Session != "s" || !m.Used.Equal(t0) {
		t.Fatalf("Stat = %+v, %v", m, ok)
	}
	clk.set(t0.Add(time.Hour))
	get(t, s, "p", "s")
	if m, _ := s.Stat("p", "s"); !m.Used.Equal(t0.Add(time.Hour)) {
		t.Errorf("Used after Open = %v, want %v", m.Used, t0.Add(time.Hour))
	}
	os.WriteFile(s.path(idOf("p", "s"), extMeta), []byte("nope"), 0o600)
	if _, ok := s.Stat("p", "s"); ok {
		t.Error("Stat of a corrupt sidecar = true")
	}
}

func TestAbort(t *testing.T) {
	s, _ := newStore(t, Caps{})
	put(t, s, "p", "s", 1, []byte("kept"))
	w, err := s.Create("p", "s")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("dropped"))
	w.Abort()
	w.Abort()
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("Write after Abort succeeded")
	}
	if _, err := w.Commit(Meta{}); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	id := idOf("p", "s")
	if got, want := files(t, s.dir), []string{id + extMeta, id + extSnap}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if got, _ := get(t, s, "p", "s"); string(got) != "kept" {
		t.Errorf("Abort changed the snapshot: %q", got)
	}
}

func TestOpenRefusesShortKey(t *testing.T) {
	if _, err := Open(t.TempDir(), []byte("short"), Caps{}, zerolog.Nop()); err == nil {
		t.Error("Open with a 5-byte key succeeded")
	}
}

func TestDifferentKeyDoesNotVerify(t *testing.T) {
	dir := t.TempDir()
	s, _ := newStoreIn(t, dir, Caps{})
	put(t, s, "p", "s", 1, []byte("x"))
	other, err := Open(dir, bytes.Repeat([]byte{1}, 32), Caps{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := other.Open("p", "s"); r != nil || !errors.Is(err, ErrTampered) {
		t.Errorf("Open under another key = %v, %v; want ErrTampered", r, err)
	}
}

// Two stores on one directory stand for two processes: flock, not the
// store's mutex, keeps them apart.
func TestConcurrentCommits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	s1, _ := newStoreIn(t, dir, Caps{})
	s2, _ := newStoreIn(t, dir, Caps{})
	for round := range 20 {
		payload := map[int64][]byte{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 2)
		for i, s := range []*Store{s1, s2} {
			call := int64(round*2 + i + 1)
			data := bytes.Repeat([]byte(fmt.Sprintf("writer %d round %d;", i, round)), 1000+i*37)
			payload[call] = data
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, err := s.Create("p", "same")
				if err != nil {
					errs <- err
					return
				}
				defer w.Abort()
				<-start
				for chunk := range slices.Chunk(data, 4096) {
					if _, err := w.Write(chunk); err != nil {
						errs <- err
						return
					}
				}
				if _, err := w.Commit(Meta{Call: call, Taken: t0}); err != nil {
					errs <- err
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		got, m := get(t, s1, "p", "same")
		if want, ok := payload[m.Call]; !ok || !bytes.Equal(got, want) {
			t.Fatalf("round %d: got call %d with %d bytes, not one of the two commits", round, m.Call, len(got))
		}
	}
	for _, name := range files(t, dir) {
		if tempRe.MatchString(name) {
			t.Errorf("temp file left: %s", name)
		}
	}
}

// Open while another store keeps replacing the snapshot never sees half of
// a commit, so it never reports tampering.
func TestOpenDuringCommits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	writer, _ := newStoreIn(t, dir, Caps{})
	reader, _ := newStoreIn(t, dir, Caps{})
	put(t, writer, "p", "s", 1, []byte("first"))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(2); ; i++ {
			select {
			case <-done:
				return
			default:
			}
			w, err := writer.Create("p", "s")
			if err != nil {
				t.Error(err)
				return
			}
			w.Write(bytes.Repeat([]byte{byte(i)}, int(i%50)*100+1))
			if _, err := w.Commit(Meta{Call: i}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 200 {
		r, err := reader.Open("p", "s")
		if err != nil || r == nil {
			t.Errorf("Open = %v, %v", r, err)
			break
		}
		if got := readAll(t, r); int64(len(got)) != r.Meta().Bytes {
			t.Errorf("read %d bytes, meta says %d", len(got), r.Meta().Bytes)
		}
		r.Close()
	}
	close(done)
	wg.Wait()
}

// Drops are logged at info by id; the names appear only at debug.
func TestSweepLogsWithoutNames(t *testing.T) {
	for _, level := range []zerolog.Level{zerolog.InfoLevel, zerolog.DebugLevel} {
		var buf bytes.Buffer
		dir := filepath.Join(t.TempDir(), "sessions")
		s, err := Open(dir, testKey, Caps{Retention: time.Hour}, zerolog.New(&buf).Level(level))
		if err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { return t0 }
		put(t, s, "secret-principal", "secret-session", 1, []byte("x"))
		buf.Reset()
		s.Sweep(t0.Add(2 * time.Hour))
		out := buf.String()
		if !strings.Contains(out, idOf("secret-principal", "secret-session")) || !strings.Contains(out, "retention") {
			t.Errorf("%s: log %q lacks the id or the reason", level, out)
		}
		if got := strings.Contains(out, "secret-"); got != (level == zerolog.DebugLevel) {
			t.Errorf("%s: names in the log = %v: %q", level, got, out)
		}
	}
}

// TestCommitCutShort: a bridge killed in the middle of a Commit leaves a
// pair that verifies. Cut after the data file is in place, the next Store
// (the next bridge) finishes the commit, at its sweep or its first Open;
// cut before (the staged sidecar is all there is of it), the previous
// snapshot stays.
func TestCommitCutShort(t *testing.T) {
	for _, c := range []struct {
		name  string
		open  bool // recovered by Open, else by Sweep
		data  bool // the data rename happened
		want  string
		calls int64
	}{
		{"data in place, then Open", true, true, "second", 2},
		{"data in place, then Sweep", false, true, "second", 2},
		{"only the sidecar staged", true, false, "first", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sessions")
			s, _ := newStoreIn(t, dir, Caps{})
			put(t, s, "", "default", 1, []byte("first"))
			w, err := s.Create("", "default")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte("second")); err != nil {
				t.Fatal(err)
			}
			if c.data {
				commitCut = func() bool { return true }
				if _, err := w.Commit(Meta{Call: 2, Taken: t0, Names: 1}); !errors.Is(err, errCommitCut) {
					t.Fatalf("Commit: %v, want it cut", err)
				}
				commitCut = nil
			} else {
				// Staged as Commit stages it, and no further.
				fi, _ := os.Lstat(w.tmp)
				side := s.path(idOf("", "default"), extMeta)
				if err := os.WriteFile(side+extNext+strconv.FormatUint(inode(fi), 10), []byte(`{"call":2}`), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			next, _ := newStoreIn(t, dir, Caps{})
			if !c.open {
				next.Sweep(t0)
			}
			got, m := get(t, next, "", "default")
			if string(got) != c.want || m.Call != c.calls {
				t.Errorf("after the cut: %q at call %d, want %q at call %d", got, m.Call, c.want, c.calls)
			}
			for _, f := range files(t, dir) {
				if strings.Contains(f, extNext) {
					t.Errorf("a staged sidecar is left: %s", f)
				}
			}
		})
	}
}

// TestFence: after Fence no write lands, an upload begun before it
// included, and the stored snapshot stays as it was for the next leader.
func TestFence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	s, _ := newStoreIn(t, dir, Caps{})
	put(t, s, "alice", "default", 1, []byte("one"))
	w, err := s.Create("alice", "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("two")); err != nil {
		t.Fatal(err)
	}
	s.Fence()
	if _, err := w.Commit(Meta{Call: 2}); !errors.Is(err, ErrFenced) {
		t.Errorf("Commit after Fence: %v, want ErrFenced", err)
	}
	if _, err := s.Create("alice", "default"); !errors.Is(err, ErrFenced) {
		t.Errorf("Create after Fence: %v, want ErrFenced", err)
	}
	if err := s.SetLastCall("alice", "default", 9); !errors.Is(err, ErrFenced) {
		t.Errorf("SetLastCall after Fence: %v, want ErrFenced", err)
	}
	if err := s.Delete("alice", "default"); !errors.Is(err, ErrFenced) {
		t.Errorf("Delete after Fence: %v, want ErrFenced", err)
	}
	s.Sweep(t0.Add(1000 * time.Hour))
	next, _ := newStoreIn(t, dir, Caps{})
	got, m := get(t, next, "alice", "default")
	if string(got) != "one" || m.Call != 1 || m.LastCall != 1 {
		t.Errorf("the next leader reads %q (call %d, last call %d), want %q of call 1", got, m.Call, m.LastCall, "one")
	}
}

// TestCommitOutOfOrder: uploads finish in any order; an earlier call's
// snapshot, taken earlier, does not replace a later one's, but a session
// started afresh (its calls counted from 1 again, taken later) does.
func TestCommitOutOfOrder(t *testing.T) {
	s, _ := newStore(t, Caps{})
	put(t, s, "p", "s", 6, []byte("six"))
	if m := put(t, s, "p", "s", 5, []byte("five")); m.Call != 6 {
		t.Errorf("the late commit of call 5 answered call %d, want the kept 6", m.Call)
	}
	if got, m := get(t, s, "p", "s"); string(got) != "six" || m.Call != 6 {
		t.Errorf("after a late call 5: %q, call %d; want six, 6", got, m.Call)
	}
	w, err := s.Create("p", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.Write([]byte("fresh"))
	if _, err := w.Commit(Meta{Call: 1, Taken: t0.Add(time.Hour), Names: 1}); err != nil {
		t.Fatal(err)
	}
	if got, m := get(t, s, "p", "s"); string(got) != "fresh" || m.Call != 1 {
		t.Errorf("a fresh session's call 1: %q, call %d; want fresh, 1", got, m.Call)
	}
	if ents, _ := os.ReadDir(s.dir); len(ents) > 3 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("files left: %v", names)
	}
}
