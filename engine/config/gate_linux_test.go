package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestGateSeesEveryCoveredChange: after each change to a covered path, the
// very next Stamp is fresh (RLD-1); with no change, or a change to a name
// nothing covers, it is not.
func TestGateSeesEveryCoveredChange(t *testing.T) {
	root := t.TempDir()
	home, cfg, real := filepath.Join(root, "home"), filepath.Join(root, "cfg"), filepath.Join(root, "real")
	other := filepath.Join(root, "other")
	for _, d := range []string{home, cfg, real, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".claude.json"), "{}")
	write(filepath.Join(cfg, "a.json"), "{}")
	write(filepath.Join(real, "t.json"), "{}")
	write(filepath.Join(other, "hard.json"), "{}")
	write(filepath.Join(other, "soft.json"), "{}")
	for _, err := range []error{
		os.Symlink(real, filepath.Join(home, "link")),
		os.Link(filepath.Join(other, "hard.json"), filepath.Join(cfg, "hard.json")),
		os.Symlink(filepath.Join(other, "soft.json"), filepath.Join(cfg, "soft.json")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	paths := GatePaths{
		Files: []string{filepath.Join(home, ".claude.json"), filepath.Join(home, ".cursor", "mcp.json"),
			filepath.Join(home, "x", "y", "z.json"), filepath.Join(home, "link", "t.json")},
		Dirs: []string{cfg},
	}
	var g Gate
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	fresh := 0
	stamp := func() { g.Stamp(paths, func() string { fresh++; return "s" }) }
	stamp()
	stamp()
	if fresh != 1 {
		t.Fatalf("fresh stamps with nothing changed: got %d, want 1", fresh)
	}

	tests := []struct {
		name   string
		change func()
		fresh  bool
	}{
		{"file written", func() { write(filepath.Join(home, ".claude.json"), `{"a":1}`) }, true},
		{"file chmod", func() { _ = os.Chmod(filepath.Join(home, ".claude.json"), 0o600) }, true},
		{"unrelated file in an ancestor", func() { write(filepath.Join(home, "notes.txt"), "x") }, false},
		{"missing parent created", func() { _ = os.Mkdir(filepath.Join(home, ".cursor"), 0o755) }, true},
		{"missing file created", func() { write(filepath.Join(home, ".cursor", "mcp.json"), "{}") }, true},
		{"deep missing chain created", func() {
			_ = os.MkdirAll(filepath.Join(home, "x", "y"), 0o755)
			write(filepath.Join(home, "x", "y", "z.json"), "{}")
		}, true},
		{"listed dir gains a file", func() { write(filepath.Join(cfg, "b.json"), "{}") }, true},
		{"listed dir's file written", func() { write(filepath.Join(cfg, "a.json"), `{"b":2}`) }, true},
		{"listed dir's hard link written through its other name", func() { write(filepath.Join(other, "hard.json"), `{"d":4}`) }, true},
		{"listed dir's symlink target written", func() { write(filepath.Join(other, "soft.json"), `{"e":5}`) }, true},
		{"unrelated file beside a symlink target", func() { write(filepath.Join(other, "notes.txt"), "x") }, false},
		{"symlink target written", func() { write(filepath.Join(real, "t.json"), `{"c":3}`) }, true},
		{"symlink replaced", func() {
			_ = os.Remove(filepath.Join(home, "link"))
			_ = os.Symlink(cfg, filepath.Join(home, "link"))
		}, true},
		{"listed dir renamed", func() { _ = os.Rename(cfg, cfg+".old") }, true},
		{"listed dir back", func() { _ = os.Rename(cfg+".old", cfg) }, true},
		{"ancestor renamed", func() { _ = os.Rename(home, home+".old") }, true},
	}
	for _, tt := range tests {
		before := fresh
		tt.change()
		stamp()
		if got := fresh > before; got != tt.fresh {
			t.Fatalf("%s: fresh stamp at the next check: got %v, want %v", tt.name, got, tt.fresh)
		}
		before = fresh
		stamp()
		if fresh != before {
			t.Fatalf("%s: a second check with nothing changed took a fresh stamp", tt.name)
		}
	}

	// A stamp older than gateMaxAge is taken afresh, changes or not.
	g.mu.Lock()
	g.at = g.at.Add(-2 * gateMaxAge)
	g.mu.Unlock()
	before := fresh
	stamp()
	if fresh != before+1 {
		t.Fatal("a stamp older than gateMaxAge was reused")
	}
}

// TestGateClosed: once its Serve ended, every Stamp is fresh.
func TestGateClosed(t *testing.T) {
	var g Gate
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.Serve(ctx)
	fresh := 0
	for range 3 {
		g.Stamp(GatePaths{Files: []string{filepath.Join(t.TempDir(), "x.json")}}, func() string { fresh++; return "" })
	}
	if fresh != 3 {
		t.Fatalf("fresh stamps after Serve ended: got %d, want 3", fresh)
	}
}
