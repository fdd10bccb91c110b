package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// podmanRootlessV1 is `podman info` of rootless podman on cgroup v1.
const podmanRootlessV1 = `{"host":{"cgroupVersion":"v1","ociRuntime":{"name":"runc"},"security":{"rootless":true}},` +
	`"store":{"graphDriverName":"vfs"},"version":{"Version":"4.3.1"}}`

// podmanScript writes an executable named podman that prints info.
func podmanScript(t *testing.T, info string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "info"), []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "podman")
	if err := os.WriteFile(path, []byte("#!/bin/sh\ncat "+dir+"/info\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLimitsNoteFirstResultOfEachSession checks that where cgroups cannot
// enforce limits, the first result of each session (and only that one)
// carries the one-line warning, and that nothing is added elsewhere.
func TestLimitsNoteFirstResultOfEachSession(t *testing.T) {
	for _, rootless := range []bool{true, false} {
		stdout := podmanRootlessV1
		if !rootless {
			stdout = strings.Replace(stdout, `"rootless":true`, `"rootless":false`, 1)
		}
		env, err := LoadEnv(envOf(nil), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		env.Runtime = podmanScript(t, stdout)
		e := New(env, "test", zerolog.Nop(), envOf(nil), false)
		first := result.Result{Session: "default", Status: result.StatusSuccess}
		e.limitsNote(first.Session, &first)
		if len(first.Notes) != 0 {
			t.Errorf("before the probe: notes %q, want none", first.Notes)
		}
		e.Container.Facts()
		var got []int
		// With bridge serve the key is (principal, session): bob's
		// "default" is not alice's.
		for _, s := range []string{"default", "default", "other", "default", "alice/default", "bob/default", "bob/default"} {
			r := result.Result{Session: s, Status: result.StatusSuccess}
			e.limitsNote(s, &r)
			got = append(got, len(r.Notes))
			if len(r.Notes) == 1 && (!strings.HasPrefix(r.Notes[0], "rootless podman on cgroup v1") || strings.Contains(r.Notes[0], "\n")) {
				t.Errorf("note %q, want one warning line", r.Notes[0])
			}
		}
		want := []int{0, 0, 0, 0, 0, 0, 0}
		if rootless {
			want = []int{1, 0, 1, 0, 1, 1, 0}
		}
		if !slices.Equal(got, want) {
			t.Errorf("rootless=%v: notes per result %v, want %v", rootless, got, want)
		}
	}
}
