package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSubIDRange checks the /etc/subuid parsing that decides per-session
// id maps.
func TestSubIDRange(t *testing.T) {
	tests := []struct {
		content     string
		first, size uint32
		ok          bool
	}{
		{"containers:2147483647:2147483648\n", 2147483647, 2147483648, true},
		{"alice:100000:65536\ncontainers:200000:65536\n", 200000, 65536, true},
		{"containers:200000:1024\n", 0, 0, false},      // too small for uid 65534
		{"containers:4294901760:65536\n", 0, 0, false}, // would reach (uid_t)-1
		{"alice:100000:65536\n", 0, 0, false},
		{"# containers:1:65536\ncontainers\n", 0, 0, false},
		{"containers:x:65536\n", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "subuid")
		if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		first, size, ok := subIDRange(path, "containers")
		if first != tt.first || size != tt.size || ok != tt.ok {
			t.Errorf("subIDRange(%q) = %d, %d, %v; want %d, %d, %v", tt.content, first, size, ok, tt.first, tt.size, tt.ok)
		}
	}
	if _, _, ok := subIDRange(filepath.Join(t.TempDir(), "none"), "containers"); ok {
		t.Errorf("a missing file has a range")
	}
}

// TestIDBlocks checks that blocks are handed out lowest first, never twice
// while held (also across allocators on the same lock directory, as two
// bridges would be), and again once released.
func TestIDBlocks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Three blocks of uids, four of gids: three usable.
	subuid := write("subuid", "containers:100000:196608\n")
	subgid := write("subgid", "containers:500000:262144\n")
	locks := filepath.Join(dir, "locks")
	a, ok := newIDBlocks(subuid, subgid, locks)
	if !ok {
		t.Fatal("newIDBlocks: no range")
	}
	b, _ := newIDBlocks(subuid, subgid, locks) // a second bridge

	m0, rel0, err := a.acquire()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m0, (IDMap{UID: 100000, GID: 500000}); got != want {
		t.Errorf("first block = %+v, want %+v", got, want)
	}
	m1, rel1, err := b.acquire()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m1, (IDMap{UID: 165536, GID: 565536}); got != want {
		t.Errorf("the other bridge's block = %+v, want %+v", got, want)
	}
	_, rel2, err := a.acquire()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.acquire(); !errors.Is(err, errNoIDBlock) {
		t.Errorf("acquire with every block held: %v, want %v", err, errNoIDBlock)
	}
	rel0()
	rel0() // idempotent: must not free a block taken again meanwhile
	m, rel, err := b.acquire()
	if err != nil || m != m0 {
		t.Errorf("after release: %+v, %v; want %+v", m, err, m0)
	}
	rel0()
	if _, _, err := a.acquire(); !errors.Is(err, errNoIDBlock) {
		t.Errorf("a second release freed a block held by the other bridge: %v", err)
	}
	for _, r := range []func(){rel, rel1, rel2} {
		r()
	}
	if _, ok := newIDBlocks(subuid, filepath.Join(dir, "none"), locks); ok {
		t.Errorf("newIDBlocks without a subgid file: ok")
	}
}
