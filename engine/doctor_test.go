package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bridge-mcp/bridge/engine/config"
)

// TestDoctorConfig checks the config lines of doctor: a skipped file or
// entry FAILs and says to fix it, a self-referential skip only WARNs, an
// unreadable dir FAILs with its cause, a missing dir and an empty one WARN
// with what to do.
func TestDoctorConfig(t *testing.T) {
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "missing")
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(tmp, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		dir  string
		set  config.Set
		want []string
	}{
		{"missing dir", missing, config.Set{}, []string{"WARN config: config dir " + missing + " does not exist: create it with a *.json server file"}},
		{"empty dir", empty, config.Set{}, []string{"WARN config: no *.json files in " + empty}},
		{"not a dir", notDir, config.Set{Problems: []config.Problem{{File: notDir, Reason: "cannot list the config dir: not a directory"}}},
			[]string{"FAIL config: config dir " + notDir + ": cannot list the config dir: not a directory; make it a directory you can read, or set MCP_BRIDGE_CONFIG_DIR"}},
		{"unreadable dir", empty, config.Set{Problems: []config.Problem{{File: empty, Reason: "cannot list the config dir: permission denied"}}},
			[]string{"FAIL config: config dir " + empty + ": cannot list the config dir: permission denied; make it a directory you can read"}},
		{"broken file", empty, config.Set{
			Files:    []string{"a.json", "b.json"},
			Entries:  []config.Entry{{Name: "x", File: "a.json"}},
			Problems: []config.Problem{{File: "b.json", Reason: "invalid JSON at line 1, column 2: unexpected end of input"}},
		}, []string{"OK   config a.json: 1 servers", "FAIL config b.json: 0 servers; skipped: invalid JSON at line 1, column 2: unexpected end of input; fix the file"}},
		{"broken entry", empty, config.Set{
			Files:    []string{"a.json"},
			Entries:  []config.Entry{{Name: "x", File: "a.json"}},
			Problems: []config.Problem{{File: "a.json", Entry: "y", Reason: `"args" must be a list`}},
		}, []string{`FAIL config a.json: 1 servers (x); skipped: y "args" must be a list; fix the file`}},
		{"the bridge's own entry is not a fault", empty, config.Set{
			Files:   []string{"a.json"},
			Entries: []config.Entry{{Name: "x", File: "a.json"}},
			Self:    []config.Problem{{File: "a.json", Entry: "me", Reason: "this bridge's own entry"}},
		}, []string{"OK   config a.json: 1 servers (x); this bridge's own entry not proxied: me"}},
	}
	for _, c := range cases {
		var got []string
		doctorConfig(c.set, Env{ConfigDir: c.dir}, func(status, name, format string, a ...any) {
			got = append(got, fmt.Sprintf("%-4s %s: %s", status, name, fmt.Sprintf(format, a...)))
		})
		if len(got) != len(c.want) {
			t.Errorf("%s: got %d lines %q, want %d", c.name, len(got), got, len(c.want))
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], c.want[i]) {
				t.Errorf("%s: line %d\n got %s\nwant %s...", c.name, i, got[i], c.want[i])
			}
		}
	}
}

// TestDoctorNotLoaded checks that `bridge doctor NAME` for a server that is
// configured but not loaded says why and where, not "not found".
func TestDoctorNotLoaded(t *testing.T) {
	set := config.Set{
		Problems:   []config.Problem{{File: "a.json", Entry: "broken", Reason: `"args" must be a list`}},
		Unapproved: []config.Problem{{File: ".mcp.json", Entry: "proj", Reason: "not approved: set MCP_BRIDGE_PROJECT_SERVERS=all"}},
		Disabled:   []config.Problem{{File: "b.json", Entry: "off", Reason: "disabled"}},
	}
	for _, c := range []struct {
		name string
		want string
	}{
		{"broken", `FAIL server broken: a.json: "args" must be a list; fix the entry`},
		{"proj", "WARN server proj: .mcp.json: not approved: set MCP_BRIDGE_PROJECT_SERVERS=all"},
		{"off", `WARN server off: b.json: disabled; remove "disabled": true to serve it`},
		{"other", ""},
	} {
		var got string
		found := doctorNotLoaded(set, c.name, func(status, name, format string, a ...any) {
			got = fmt.Sprintf("%-4s %s: %s", status, name, fmt.Sprintf(format, a...))
		})
		if got != c.want || found != (c.want != "") {
			t.Errorf("doctorNotLoaded(%q) = %v, %q; want %q", c.name, found, got, c.want)
		}
	}
}

// TestDoctorTokens: doctor checks bridge serve's tokens file: the line at
// fault of one that does not parse, a mode others can read, short tokens.
func TestDoctorTokens(t *testing.T) {
	long := strings.Repeat("k", 40)
	for _, tc := range []struct {
		name, file string
		mode       os.FileMode
		want       []string
	}{
		{"good", "alice " + long + "\nbob " + long + "x\n", 0o600, []string{"OK   tokens: FILE: 2 tokens, for alice, bob"}},
		{"wrong separator", "alice:" + long + "\n", 0o600, []string{`FAIL tokens: FILE: tokens: line 1: want "principal token" separated by a space, not ':' (e.g. alice abc) (MCP_BRIDGE_TOKENS_FILE)`}},
		{"readable and short", "alice abc\nbob " + long + "\n", 0o644, []string{
			"WARN tokens: FILE can be read by other users: `chmod 600 FILE`",
			"WARN tokens: the tokens of alice are under 32 characters, short enough to guess: make new ones with `openssl rand -hex 32`",
			"OK   tokens: FILE: 2 tokens, for alice, bob"}},
	} {
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte(tc.file), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		e := &Engine{Env: Env{TokensFile: path}}
		var got []string
		e.doctorTokens(func(status, name, format string, a ...any) {
			got = append(got, strings.ReplaceAll(fmt.Sprintf("%-4s %s: %s", status, name, fmt.Sprintf(format, a...)), path, "FILE"))
		})
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
		if strings.Contains(strings.Join(got, ""), long) {
			t.Errorf("%s: a token in doctor's output", tc.name)
		}
	}
}
