package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// appendN appends n call records with ids r1..rn.
func appendN(t *testing.T, l *Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		code := "print(" + string(rune('0'+i%10)) + ")"
		r := &Record{ID: "r" + itoa(i), Kind: KindCall, Principal: "alice", Session: "default", CodeSHA: Digest(code), Code: &code, Status: "success"}
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func open(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, testKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func lines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

func onlyFile(t *testing.T, dir string) string {
	t.Helper()
	files, err := Files(dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v %v, want one", files, err)
	}
	return files[0]
}

func TestVerifyIntact(t *testing.T) {
	dir := t.TempDir()
	appendN(t, open(t, dir, Options{Sync: true}), 1, 5)
	rep, err := Verify(dir, testKey)
	if err != nil || rep.Records != 5 || rep.From != 1 || len(rep.Incomplete) != 0 {
		t.Fatalf("Verify: %+v %v, want 5 records from 1", rep, err)
	}
	st, _ := os.Stat(onlyFile(t, dir))
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := Verify(dir, []byte("another key of thirty-two bytes!")); err == nil {
		t.Errorf("Verify under another key passed")
	}
}

func TestVerifyTampering(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(ls [][]byte) [][]byte
		wantID string
		want   string
	}{
		{"edited", func(ls [][]byte) [][]byte {
			ls[2] = bytes.Replace(ls[2], []byte(`"status":"success"`), []byte(`"status":"error"`), 1)
			return ls
		}, "r3", "MAC does not match"},
		{"removed", func(ls [][]byte) [][]byte { return append(ls[:2:2], ls[3:]...) }, "r4", "does not follow"},
		{"reordered", func(ls [][]byte) [][]byte { ls[1], ls[2] = ls[2], ls[1]; return ls }, "r3", "does not follow"},
		{"first removed", func(ls [][]byte) [][]byte { return ls[1:] }, "r2", "not a checkpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			appendN(t, open(t, dir, Options{}), 1, 5)
			f := onlyFile(t, dir)
			if err := os.WriteFile(f, bytes.Join(c.tamper(lines(t, f)), nil), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(dir, testKey)
			var b *Broken
			if !errors.As(err, &b) {
				t.Fatalf("Verify: %v, want a broken chain", err)
			}
			if got := b.ID; got != c.wantID || !strings.Contains(b.Why, c.want) {
				t.Errorf("broken at %q (%s), want %q (%s)", got, b.Why, c.wantID, c.want)
			}
		})
	}
}

// A crash mid-write leaves the last line incomplete: Verify reports it, not
// tampering, and the next append continues the chain in a new file.
func TestIncompleteLastLine(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	appendN(t, l, 1, 3)
	f := onlyFile(t, dir)
	data, _ := os.ReadFile(f)
	if err := os.WriteFile(f, append(data, `{"id":"half","ti`...), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir, testKey)
	if err != nil || rep.Records != 3 || len(rep.Incomplete) != 1 {
		t.Fatalf("Verify: %+v %v, want 3 records and one incomplete file", rep, err)
	}
	l = open(t, dir, Options{}) // the process that crashed is gone; the next one appends
	appendN(t, l, 4, 2)
	rep, err = Verify(dir, testKey)
	if err != nil || rep.Records != 6 || len(rep.Incomplete) != 1 { // a checkpoint and two records after it
		t.Fatalf("Verify after more appends: %+v %v, want 6 records", rep, err)
	}
}

// Files are closed at MaxFileBytes, each later one opening with a
// checkpoint; retention drops the oldest and the rest still verifies.
func TestRotationAndRetention(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	l := open(t, dir, Options{MaxFileBytes: 600, Retention: 48 * time.Hour, Now: func() time.Time { return now }})
	seen := map[string]bool{}
	for day := 0; day < 5; day++ {
		appendN(t, l, day*3+1, 3)
		files, _ := Files(dir)
		for i, f := range files { // a file's time is its last write's, on the test's clock
			if !seen[f] || i == len(files)-1 {
				_ = os.Chtimes(f, now, now)
			}
			seen[f] = true
		}
		now = now.Add(24 * time.Hour)
	}
	files, _ := Files(dir)
	rep, err := Verify(dir, testKey)
	if err != nil {
		t.Fatalf("Verify after retention: %v", err)
	}
	if rep.From == 1 {
		t.Errorf("retention dropped nothing: %d files, chain from %d", len(files), rep.From)
	}
	first := lines(t, files[0])[0]
	var cp Record
	_ = json.Unmarshal(first, &cp)
	if cp.Kind != KindCheckpoint || cp.Before != cp.Seq-1 {
		t.Errorf("the oldest file kept opens with %s, want a checkpoint", first)
	}
}

func TestRedaction(t *testing.T) {
	r := NewRedactor(func(w string) bool { return w == "s3cr3t-token-value" })
	got := string(r.JSON(json.RawMessage(`{"title":"hi s3cr3t-token-value","github_token":"ghp_x","max_tokens":5,"author":"bob",` +
		`"headers":{"Authorization":"Bearer abcdefghijkl"},"note":"use Bearer abcdefghijklmnop here","X-Api-Key":"k"}`)))
	want := `{"X-Api-Key":"[redacted]","author":"bob","github_token":"[redacted]","headers":{"Authorization":"[redacted]"},` +
		`"max_tokens":5,"note":"use Bearer [redacted] here","title":"hi [redacted]"}`
	if got != want {
		t.Errorf("redacted:\n got %s\nwant %s", got, want)
	}
	v := NewValue(json.RawMessage(`"`+strings.Repeat("x", MaxValueBytes)+`"`), r)
	if v.JSON != nil || v.Bytes != MaxValueBytes+2 || len(v.SHA256) != 64 {
		t.Errorf("a value over the cap: %+v, want its digest and size only", v)
	}
}

func TestConcurrentLogsShareOneChain(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, Options{}), open(t, dir, Options{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		appendN(t, a, 1, 50)
	}()
	appendN(t, b, 100, 50)
	<-done
	if rep, err := Verify(dir, testKey); err != nil || rep.Records != 100 {
		t.Fatalf("Verify: %+v %v, want 100 records", rep, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".lock")); err != nil {
		t.Error(err)
	}
}
