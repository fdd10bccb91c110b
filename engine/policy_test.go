package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPolicy checks LoadPolicy's parsing and the rules it yields.
func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	if got := LoadPolicy(dir); got != nil {
		t.Fatalf("no file: got %+v, want nil", got)
	}
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, PolicyFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"maxToolCallsPerExecution": 3, "servers": {
		"*": {"deny": ["*delete*"]},
		"gh": {"allow": ["list_*", "get_*", "delete_branch"], "timeouts": {"get_*": 2.5}},
		"fs": {"deny": ["write_file"], "timeouts": {"read_file": 1}}}}`)
	p := LoadPolicy(dir)
	if p == nil || p.Err != nil || p.MaxCalls != 3 {
		t.Fatalf("LoadPolicy = %+v", p)
	}
	cases := []struct {
		server, tool string
		want         string // "" allowed, else a substring of the error
	}{
		{"gh", "list_issues", ""},
		{"gh", "create_issue", "is not allowed by the policy"},
		{"gh", "delete_branch", "is denied by the policy"}, // "*" deny wins over gh's allow
		{"fs", "write_file", "Tool fs.write_file is denied by the policy (" + filepath.Join(dir, PolicyFile) + ")"},
		{"fs", "read_file", ""},
		{"other", "anything", ""},
		{"other", "bulk_delete", "is denied"},
	}
	for _, c := range cases {
		err := p.Check(c.server, c.tool)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Check(%s, %s) = %v, want %q", c.server, c.tool, err, c.want)
		}
	}
	if d, ok := p.Timeout("gh", "get_repo"); !ok || d != 2500*time.Millisecond {
		t.Errorf("Timeout(gh, get_repo) = %v, %v", d, ok)
	}
	if d, ok := p.Timeout("fs", "read_file"); !ok || d != time.Second {
		t.Errorf("Timeout(fs, read_file) = %v, %v", d, ok)
	}
	if _, ok := p.Timeout("fs", "list_directory"); ok {
		t.Errorf("Timeout(fs, list_directory) applied")
	}
	// Invalid files fail closed, with a message naming the problem.
	for body, want := range map[string]string{
		`{"servers": `:                               "unexpected EOF",
		`{"maxToolCalls": 3}`:                        `unknown field "maxToolCalls"`,
		`{"maxToolCallsPerExecution": -1}`:           "must be 0 (no cap) or more",
		`{"servers": {"a": {"deny": ["[x"]}}}`:       "is not pattern syntax",
		`{"servers": {"a": {"timeouts": {"t": 0}}}}`: "must be above 0 seconds",
		`{"servers": {"a": {"allow": "list_*"}}}`:    "cannot unmarshal",
		`[]`: "cannot unmarshal",
	} {
		write(body)
		p := LoadPolicy(dir)
		if p == nil || p.Err == nil || !strings.Contains(p.Err.Error(), want) {
			t.Errorf("LoadPolicy(%s) = %+v, want error containing %q", body, p, want)
			continue
		}
		if err := p.Check("any", "tool"); err == nil || !strings.Contains(err.Error(), "Tool calls are disabled: the policy file") {
			t.Errorf("invalid policy %s allowed a call: %v", body, err)
		}
	}
}

// TestPolicyPrincipals checks the per-principal grants of bridge serve:
// read from "principals", held to the top-level rules as well, and a bad
// pattern in one fails the whole file closed.
func TestPolicyPrincipals(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, PolicyFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"servers": {"*": {"deny": ["*delete*"]}},
		"principals": {"alice": {"servers": {"gh": {"allow": ["get_*", "delete_branch"]}}}}}`)
	p := LoadPolicy(dir)
	if p == nil || p.Err != nil {
		t.Fatalf("LoadPolicy = %+v", p)
	}
	for _, c := range []struct {
		principal, server, tool string
		ok                      bool
	}{
		{"alice", "gh", "get_issue", true},
		{"alice", "gh", "list_issues", false},
		{"alice", "gh", "delete_branch", false},
		{"alice", "fs", "read_file", false},
		{"bob", "fs", "read_file", true},
		{"bob", "gh", "delete_branch", false},
	} {
		if err := p.CheckFor(c.principal, c.server, c.tool); (err == nil) != c.ok {
			t.Errorf("CheckFor(%s, %s.%s) = %v, want ok %v", c.principal, c.server, c.tool, err, c.ok)
		}
	}
	write(`{"principals": {"alice": {"servers": {"gh": {"allow": ["["]}}}}}`)
	if p := LoadPolicy(dir); p == nil || p.Err == nil || !strings.Contains(p.Err.Error(), `principal "alice"`) {
		t.Errorf("bad principal pattern: %+v, want an error naming alice", p)
	}
	for _, body := range []string{
		`{"principals": {"alice": {"server": {}}}}`,
		`{"principals": {"alice": {"servers": {"gh": {"aprove": ["x"]}}}}}`,
		`{"servers": {"gh": {"timeout": {"x": 1}}}}`,
	} {
		write(body)
		if p := LoadPolicy(dir); p == nil || p.Err == nil || !strings.Contains(p.Err.Error(), "unknown field") {
			t.Errorf("unknown key in %s: %+v, want an error naming it", body, p)
		}
	}
	// Every top-level key is read at the principal level too.
	write(`{"principals": {"bob": {"maxToolCallsPerExecution": 3, "approveDestructive": true,
		"servers": {"gh": {"approve": ["merge"], "resources": false, "timeouts": {"get_*": 2}}}}}}`)
	p = LoadPolicy(dir)
	if p == nil || p.Err != nil {
		t.Fatalf("LoadPolicy = %+v", p)
	}
	if d, _ := p.TimeoutFor("bob", "gh", "get_issue"); p.MaxCallsFor("bob") != 3 || d != 2*time.Second ||
		p.GateFor("bob", "gh", "merge", nil) == "" || p.GateFor("bob", "gh", "drop", []byte(`{"destructiveHint":true}`)) == "" ||
		p.ResourcesAllowedFor("bob", "gh") == nil {
		t.Errorf("bob's own keys not all in force: cap %d, timeout %v", p.MaxCallsFor("bob"), d)
	}
}
