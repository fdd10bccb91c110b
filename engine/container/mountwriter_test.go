package container

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriterWritable: a read-write mount's folder is writable by the
// sandbox as the runtime maps its user: by all for rootful podman's
// per-session uids, by owner, group or all for one fixed uid.
func TestWriterWritable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root; the e2e TestMountNotWritable covers an ordinary user") // unit layer only
	}
	nobody := Writer{UID: 65534, GID: 65534}
	perSession := Writer{AnyUID: true}
	tests := []struct {
		name     string
		w        Writer
		uid, gid int
		mode     os.FileMode
		want     bool
	}{
		{"any uid, sticky and open to all", perSession, 0, 0, 0o1777, true},
		{"any uid, root's 0755", perSession, 0, 0, 0o755, false},
		{"any uid, owned by 65534 only", perSession, 65534, 65534, 0o755, false},
		{"nobody, owner", nobody, 65534, 0, 0o755, true},
		{"nobody, owner without write", nobody, 65534, 0, 0o555, false},
		{"nobody, group", nobody, 0, 65534, 0o775, true},
		{"nobody, group without write", nobody, 0, 65534, 0o755, false},
		{"nobody, root's 0755", nobody, 0, 0, 0o755, false},
		{"nobody, open to all", nobody, 0, 0, 0o777, true},
		{"nobody, others write without search", nobody, 0, 0, 0o772, false},
	}
	for _, tt := range tests {
		dir := filepath.Join(t.TempDir(), "m")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, tt.uid, tt.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tt.mode); err != nil {
			t.Fatal(err)
		}
		if got := tt.w.Writable(dir); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	if (Writer{Self: true}).Writable(filepath.Join(t.TempDir(), "missing")) {
		t.Error("self: a missing folder is writable")
	}
}
