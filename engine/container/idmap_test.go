package container

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
		{"containers:200000:1024\n", 200000, 1024, true}, // too small for a block: newIDBlocks refuses it
		{"containers:4294901760:65536\n", 0, 0, false},   // would reach (uid_t)-1
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
		first, size, ok := SubIDRange(path, "containers")
		if first != tt.first || size != tt.size || ok != tt.ok {
			t.Errorf("SubIDRange(%q) = %d, %d, %v; want %d, %d, %v", tt.content, first, size, ok, tt.first, tt.size, tt.ok)
		}
	}
	if _, _, ok := SubIDRange(filepath.Join(t.TempDir(), "none"), "containers"); ok {
		t.Errorf("a missing file has a range")
	}
	path := filepath.Join(t.TempDir(), "subuid")
	if err := os.WriteFile(path, []byte("alice:100000:65536\n1001:300000:65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if first, _, ok := SubIDRange(path, "bob", "1001"); !ok || first != 300000 {
		t.Errorf("a line by uid: %d, %v; want 300000, true", first, ok)
	}
}

// TestIDMapArgs checks the flags of a block map (rootful) and a single-id
// map (rootless).
func TestIDMapArgs(t *testing.T) {
	tests := []struct {
		m    IDMap
		want []string
	}{
		{IDMap{UID: 2147483647, GID: 2147483647}, []string{"--uidmap", "0:2147483647:65536", "--gidmap", "0:2147483647:65536"}},
		{IDMap{UID: 3, GID: 4, Single: true}, []string{"--uidmap", "0:0:1", "--uidmap", "65534:3:1", "--gidmap", "0:0:1", "--gidmap", "65534:4:1"}},
	}
	for _, tt := range tests {
		if got := tt.m.Args(); !slices.Equal(got, tt.want) {
			t.Errorf("%+v.Args() = %q, want %q", tt.m, got, tt.want)
		}
	}
}

// TestSingleIDs checks rootless single-id maps: ids 1.. of the user's own
// namespace, lowest free first, from the user's line found by name or uid.
func TestSingleIDs(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "subid")
	if err := os.WriteFile(sub, []byte("other:100000:65536\n1001:200000:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := newSingleIDs(sub, sub, dir, "nobody-here"); ok {
		t.Fatal("a user without a range got single ids")
	}
	b, ok := newSingleIDs(sub, sub, filepath.Join(dir, "locks"), "u", "1001")
	if !ok {
		t.Fatal("newSingleIDs: no range")
	}
	var got []IDMap
	for range 2 {
		m, _, err := b.acquire()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if want := []IDMap{{1, 1, true}, {2, 2, true}}; !slices.Equal(got, want) {
		t.Errorf("maps %+v, want %+v", got, want)
	}
	if _, _, err := b.acquire(); !errors.Is(err, errNoIDBlock) {
		t.Errorf("a third map from a range of 2: %v", err)
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
	small := write("small", "containers:100000:1024\n")
	if _, ok := newIDBlocks(small, small, locks); ok {
		t.Errorf("newIDBlocks with a range smaller than a block: ok")
	}
}
