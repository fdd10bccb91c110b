package fileperm

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestForeign: world bits always count, group bits only when the file's
// group is not the process's gid (which only root can set up here).
func TestForeign(t *testing.T) {
	for _, c := range []struct {
		mode       fs.FileMode
		otherGroup bool
		want       fs.FileMode
	}{
		{0o600, false, 0},
		{0o440, false, 0},
		{0o660, false, 0},
		{0o644, false, 0o004},
		{0o602, false, 0o002},
		{0o640, true, 0o040},
		{0o620, true, 0o020},
		{0o644, true, 0o044},
	} {
		if c.otherGroup && os.Geteuid() != 0 {
			continue // only root may give a file a group it is not in
		}
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if c.otherGroup {
			if err := os.Chown(p, -1, os.Getgid()+1); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := Foreign(st); got != c.want {
			t.Errorf("mode %o (other group %v): Foreign = %o, want %o", c.mode, c.otherGroup, got, c.want)
		}
	}
}
