package httpd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestParseTokens(t *testing.T) {
	set, err := ParseTokens([]byte("# team\nalice  tok-a\n\n  bob tok-b # not a comment here\n"))
	if err == nil {
		t.Fatalf("three fields parsed: %v", set.Principals())
	}
	set, err = ParseTokens([]byte("# team\nalice  tok-a\n\n  bob\ttok-b\n# end\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ token, want string }{{"tok-a", "alice"}, {"tok-b", "bob"}, {"tok-c", ""}, {"", ""}, {"tok-a ", ""}} {
		got, _ := set.Lookup(c.token)
		if got != c.want {
			t.Errorf("Lookup(%q) = %q, want %q", c.token, got, c.want)
		}
	}
}

func TestParseTokensInvalid(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"empty token", "alice\n", "line 1: principal alice has an empty token"},
		{"shared token", "alice t1\nbob t1\n", "line 2: the token of bob is also given to alice"},
		{"same line twice", "alice t1\nalice t1\n", "line 2: principal alice lists the same token twice"},
		{"bad principal", "al/ice t1\n", "line 1: principal must be"},
		{"dot principal", ".. t1\n", "line 1: principal must be"},
		{"long principal", strings.Repeat("a", 65) + " t1\n", "line 1: principal must be"},
		{"no tokens", "# nobody\n", "lists no tokens"},
		{"colon separator", "alice:t1\n", `line 1: want "principal token" separated by a space, not ':'`},
		{"equals separator", "alice=t1\n", `separated by a space, not '='`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTokens([]byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "t1") {
				t.Errorf("error quotes a token: %v", err)
			}
		})
	}
}

func TestLoadTokensOthersReadable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte("alice t1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, others, err := LoadTokens(p); err != nil || others {
		t.Fatalf("0600: others=%v err=%v, want false nil", others, err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, others, err := LoadTokens(p); err != nil || !others {
		t.Fatalf("0644: others=%v err=%v, want true nil", others, err)
	}
	// A Secret mounted with defaultMode 0440 and fsGroup: group-read by the
	// process's own gid is not others.
	if err := os.Chmod(p, 0o440); err != nil {
		t.Fatal(err)
	}
	if _, others, err := LoadTokens(p); err != nil || others {
		t.Fatalf("0440, own gid: others=%v err=%v, want false nil", others, err)
	}
	if os.Geteuid() == 0 { // a group the process is not: only root may chown so
		if err := os.Chown(p, -1, os.Getgid()+1); err != nil {
			t.Fatal(err)
		}
		if _, others, err := LoadTokens(p); err != nil || !others {
			t.Fatalf("0440, another gid: others=%v err=%v, want true nil", others, err)
		}
	}
}

// TestReloadKeepsOldSetOnError checks that a change is picked up, that an
// invalid file keeps the previous set with one error logged, and that the
// next valid file is taken.
func TestReloadKeepsOldSetOnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) { replaceFile(t, p, s) }
	write("alice t1\n")
	var logs strings.Builder
	log := zerolog.New(&logs)
	r, err := NewReloaded("tokens", []string{p}, func() (*TokenSet, error) {
		s, _, err := LoadTokens(p)
		return s, err
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	write("alice t2\n")
	r.Check()
	if got, _ := r.Get().Lookup("t2"); got != "alice" {
		t.Fatalf("after a valid change, t2 -> %q, want alice", got)
	}
	write("alice\n")
	r.Check()
	r.Check()
	if got, _ := r.Get().Lookup("t2"); got != "alice" {
		t.Fatalf("after an invalid change, t2 -> %q, want alice (the old set)", got)
	}
	if got := strings.Count(logs.String(), `"level":"error"`); got != 1 {
		t.Errorf("error lines = %d, want 1:\n%s", got, logs.String())
	}
	if strings.Contains(logs.String(), "t2") || strings.Contains(logs.String(), "t1") {
		t.Errorf("a token was logged:\n%s", logs.String())
	}
	write("bob t3\n")
	r.Check()
	if got, _ := r.Get().Lookup("t3"); got != "bob" {
		t.Fatalf("after a fix, t3 -> %q, want bob", got)
	}
}

// TestReloadRevokesEmptiedOrDeletedTokens: while serving, a tokens file
// that lists no token, or is missing at two checks in a row, revokes every
// token with one warning; missing at one check only (an editor's
// delete-then-write) revokes nothing, and a malformed file keeps the
// previous set.
func TestReloadRevokesEmptiedOrDeletedTokens(t *testing.T) {
	const (
		check = "check"
		del   = "delete"
	)
	for _, c := range []struct {
		name  string
		steps []string // check, delete, or the file's new content
		token string
		want  string // the token's principal after the steps; "" revoked
		warns int
	}{
		{"emptied", []string{"", check}, "t1", "", 1},
		{"comments only", []string{"# nobody for now\n\n", check, check}, "t1", "", 1},
		{"deleted at two checks", []string{del, check, check, check}, "t1", "", 1},
		{"deleted at one check", []string{del, check}, "t1", "alice", 0},
		{"deleted then written", []string{del, check, "bob t2\n", check, check}, "t2", "bob", 0},
		{"emptied then deleted", []string{"", check, del, check, check}, "t1", "", 1},
		{"emptied then filled", []string{"", check, "bob t2\n", check}, "t2", "bob", 1},
		{"deleted then written at two checks", []string{del, check, check, "bob t2\n", check}, "t2", "bob", 1},
		{"malformed", []string{"alice\n", check, check}, "t1", "alice", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tokens")
			write := func(s string) { replaceFile(t, p, s) }
			write("alice t1\n")
			var logs strings.Builder
			r, err := NewReloaded("tokens", []string{p}, func() (*TokenSet, error) {
				s, _, err := LoadTokens(p)
				return s, err
			}, zerolog.New(&logs))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.steps {
				switch s {
				case check:
					r.Check()
				case del:
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
				default:
					write(s)
				}
			}
			if got, _ := r.Get().Lookup(c.token); got != c.want {
				t.Errorf("Lookup(%s) = %q, want %q", c.token, got, c.want)
			}
			if got := strings.Count(logs.String(), `"level":"warn"`); got != c.warns {
				t.Errorf("warn lines = %d, want %d:\n%s", got, c.warns, logs.String())
			}
			if c.want == "" && r.Get().Len() != 0 {
				t.Errorf("revoked set has %d tokens, want 0", r.Get().Len())
			}
		})
	}
}

// TestLoadTokensEmptyOrMissingAtStart: at start-up an empty or missing
// tokens file is still an error (bridge serve exits 2 on it).
func TestLoadTokensEmptyOrMissingAtStart(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, want string }{
		{"empty", empty, "lists no tokens"},
		{"missing", filepath.Join(dir, "missing"), "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewReloaded("tokens", []string{c.path}, func() (*TokenSet, error) {
				s, _, err := LoadTokens(c.path)
				return s, err
			}, zerolog.Nop())
			if got := fmt.Sprint(err); !strings.Contains(got, c.want) {
				t.Errorf("NewReloaded = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// replaceFile writes s to p through a new inode, as an editor or a secret
// update does.
func replaceFile(t *testing.T, p, s string) {
	t.Helper()
	tmp := p + ".new"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}
