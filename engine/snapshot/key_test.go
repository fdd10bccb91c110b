package snapshot

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLoadKeyCreatesAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", ".bridge")
	path := filepath.Join(dir, "snapshot.key")
	key, warning, err := LoadKey(path)
	if err != nil || warning != "" {
		t.Fatalf("LoadKey = %v, %q", err, warning)
	}
	if len(key) != 32 {
		t.Errorf("key holds %d bytes, want 32", len(key))
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(raw), hex.EncodeToString(key)+"\n"; got != want {
		t.Errorf("file holds %q, want %q", got, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %o, want 600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %o, want 700", fi.Mode().Perm())
	}
	again, warning, err := LoadKey(path)
	if err != nil || warning != "" || !bytes.Equal(again, key) {
		t.Errorf("second LoadKey = %x, %q, %v; want the same key", again, warning, err)
	}
}

func TestLoadKeyContents(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	decoded, _ := hex.DecodeString(hex64)
	raw40 := strings.Repeat("k", 40)
	hex40 := strings.Repeat("ab", 20) // valid hex of 20 bytes, 40 raw bytes
	cases := []struct {
		name    string
		content string
		want    []byte
		wantErr string
	}{
		{"hex", hex64 + "\n", decoded, ""},
		{"hex in white space", "  \n" + strings.ToUpper(hex64) + "\r\n\t", decoded, ""},
		{"raw bytes", raw40, []byte(raw40), ""},
		{"short hex is raw", hex40 + "\n", []byte(hex40), ""},
		{"short", "abc\n", nil, "holds fewer than 32 bytes; delete it to have a new one made, or write 64 hex digits"},
		{"empty", "", nil, "holds fewer than 32 bytes"},
		{"31 raw bytes", strings.Repeat("x", 31), nil, "holds fewer than 32 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, _, err := LoadKey(path)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one containing %q and the path", err, c.wantErr)
				}
				if b, _ := os.ReadFile(path); string(b) != c.content {
					t.Error("a short key file was rewritten")
				}
				return
			}
			if err != nil || !bytes.Equal(got, c.want) {
				t.Errorf("LoadKey = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestLoadKeyWarnsOnPermissiveMode(t *testing.T) {
	cases := []struct {
		mode       os.FileMode
		otherGroup bool // the file's group is not the process's gid
		warn       bool
	}{
		{0o600, false, false},
		{0o400, false, false},
		// A Secret mounted with defaultMode 0440 and fsGroup: the group is
		// the process's own.
		{0o440, false, false},
		{0o640, false, false},
		{0o604, false, true},
		{0o644, false, true},
		{0o640, true, true},
		{0o620, true, true},
	}
	for _, c := range cases {
		if c.otherGroup && os.Geteuid() != 0 {
			continue // only root may give a file a group it is not in
		}
		path := filepath.Join(t.TempDir(), "key")
		if err := os.WriteFile(path, []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
			t.Fatal(err)
		}
		if c.otherGroup {
			if err := os.Chown(path, -1, os.Getgid()+1); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		key, warning, err := LoadKey(path)
		if err != nil || len(key) != 32 {
			t.Fatalf("mode %o: LoadKey = %d bytes, %v", c.mode, len(key), err)
		}
		if got := warning != ""; got != c.warn {
			t.Errorf("mode %o (other group %v): warning %q, want a warning: %v", c.mode, c.otherGroup, warning, c.warn)
		}
		if c.warn && (!strings.Contains(warning, "chmod 600") || !strings.Contains(warning, path)) {
			t.Errorf("mode %o: warning %q names neither the fix nor the file", c.mode, warning)
		}
	}
}

// Processes racing to make the key all end up with the one that was written.
func TestLoadKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d", "key")
	keys := make([][]byte, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], _, errs[i] = LoadKey(path)
		}()
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || !bytes.Equal(keys[i], keys[0]) {
			t.Errorf("LoadKey #%d = %x, %v; want %x", i, keys[i], errs[i], keys[0])
		}
	}
}
