package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bridge-mcp/bridge/engine/oauth"
	"github.com/bridge-mcp/bridge/engine/snapshot"
)

func TestAuthUsage(t *testing.T) {
	home := t.TempDir()
	cfgDir := filepath.Join(home, "MCPs")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"mcpServers":{"remote":{"type":"http","url":"https://mcp.example.com/mcp"},"local":{"command":"true"}}}`
	if err := os.WriteFile(filepath.Join(cfgDir, "s.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": cfgDir, "MCP_BRIDGE_STATE_DIR": filepath.Join(home, "state"),
		"MCP_BRIDGE_CONFIG_SOURCES": "mcps"}
	for _, c := range []struct {
		args    []string
		code    int
		out     string
		errLine string
	}{
		{[]string{"auth"}, 2, "", "bridge: auth: want a subcommand: login NAME, status or logout NAME (bridge auth --help)\n"},
		{[]string{"auth", "frob"}, 2, "", `bridge: auth: unknown subcommand "frob": want login NAME, status or logout NAME (bridge auth --help)` + "\n"},
		{[]string{"auth", "login"}, 2, "", "bridge: auth login: want the server NAME: bridge auth login NAME (bridge auth --help)\n"},
		{[]string{"auth", "login", "nope"}, 2, "", `bridge: auth login: no configured server "nope" (http servers: remote; bridge doctor lists them)` + "\n"},
		{[]string{"auth", "login", "local"}, 2, "", `bridge: auth login: server "local" is a stdio server; only http and sse servers sign in` + "\n"},
		{[]string{"auth", "login", "remote", "--timeout", "soon"}, 2, "", `bridge: auth login: invalid value "soon" for --timeout`},
		{[]string{"auth", "login", "--help"}, 0, "usage: bridge auth login NAME [--scope SCOPES] [--no-browser] [--timeout D]\n", ""},
		{[]string{"auth", "logout", "-h"}, 0, "usage: bridge auth logout NAME [--principal P]\n", ""},
		{[]string{"auth", "status", "--principal", "../x"}, 2, "", `bridge: auth status: --principal: principal "../x": a principal is 1-64 characters`},
		{[]string{"auth", "logout", "remote", "--principal", ""}, 0, "remote: was not signed in\n", ""},
		{[]string{"auth", "status"}, 0, "remote: not signed in (bridge doctor tells whether it needs it)\n", ""},
		{[]string{"auth", "logout", "remote"}, 0, "remote: was not signed in\n", ""},
	} {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
		code := m.Run(context.Background(), c.args)
		if code != c.code || !strings.HasPrefix(out.String(), c.out) || !strings.HasPrefix(errb.String(), c.errLine) || strings.Count(errb.String(), "\n") > 1 {
			t.Errorf("Run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out.String(), errb.String(), c.code, c.out, c.errLine)
		}
	}
}

// TestAuthStatusAndLogout: with tokens stored for two servers, status
// shows each one signed in (never a token), logout removes the named
// server's tokens only, and status then says it is not signed in.
func TestAuthStatusAndLogout(t *testing.T) {
	home := t.TempDir()
	cfgDir := filepath.Join(home, "MCPs")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"mcpServers":{"remote":{"type":"http","url":"https://mcp.example.com/mcp"},"other":{"type":"http","url":"https://other.example.com/mcp"},` +
		`"own":{"type":"http","url":"https://own.example.com/mcp","identity":"principal"}}}`
	if err := os.WriteFile(filepath.Join(cfgDir, "s.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(home, "state")
	env := map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": cfgDir, "MCP_BRIDGE_STATE_DIR": state,
		"MCP_BRIDGE_CONFIG_SOURCES": "mcps"}
	key, _, err := snapshot.LoadKey(filepath.Join(home, ".config", "bridge", "key"))
	if err != nil {
		t.Fatal(err)
	}
	store := oauth.NewStore(state, key)
	until := time.Now().Add(time.Hour)
	alice := oauth.NewStoreAt(filepath.Join(state, ".bridge", "principals", "alice", "oauth"), key)
	if err := alice.Save(&oauth.Record{Server: "own", Resource: "https://own.example.com/mcp", AccessToken: "secret-alice", Account: "alice@upstream", ExpiresAt: until}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*oauth.Record{
		{Server: "remote", Resource: "https://mcp.example.com/mcp", AccessToken: "secret-remote", RefreshToken: "r1", Scope: "read", ExpiresAt: until},
		{Server: "other", Resource: "https://other.example.com/mcp", AccessToken: "secret-other", ExpiresAt: until},
	} {
		if err := store.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
		if code := m.Run(context.Background(), args); code != 0 || errb.Len() > 0 {
			t.Fatalf("Run(%q) = %d, stderr %q", args, code, errb.String())
		}
		if strings.Contains(out.String(), "secret-") {
			t.Errorf("Run(%q) printed a token: %q", args, out.String())
		}
		return out.String()
	}
	got := run("auth", "status")
	for _, want := range []string{"remote: signed in (scope read, until ", ", refreshed automatically)", "other: signed in (until "} {
		if !strings.Contains(got, want) {
			t.Errorf("status = %q, want it to contain %q", got, want)
		}
	}
	if got, want := run("auth", "logout", "remote"), "remote: signed out (tokens removed)\n"; got != want {
		t.Errorf("logout = %q, want %q", got, want)
	}
	got = run("auth", "status")
	if !strings.Contains(got, "remote: not signed in") || !strings.Contains(got, "other: signed in") {
		t.Errorf("status after logout = %q, want remote not signed in and other still signed in", got)
	}
	if rec, err := store.Load("other", "https://other.example.com/mcp"); err != nil || rec == nil || rec.AccessToken != "secret-other" {
		t.Errorf("other's tokens after logging out remote: %v, %v", rec, err)
	}

	// A principal's own sign-ins: status shows theirs only, and a logout
	// forgets that pair and nothing else.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "status"}, "own: identity principal: each principal signs in as themselves (bridge auth status --principal P)"},
		{[]string{"auth", "status", "--principal", "alice"}, "own: signed in (as alice@upstream, until "},
		{[]string{"auth", "status", "--principal", "alice"}, "other: shared identity: alice uses the operator's sign-in (bridge auth status)"},
		{[]string{"auth", "status", "--principal", "bob"}, "own: not signed in"},
		{[]string{"auth", "logout", "own", "--principal", "bob"}, "own: was not signed in for bob\n"},
		{[]string{"auth", "logout", "own", "--principal", "alice"}, "own: signed out for alice (tokens removed)\n"},
		{[]string{"auth", "status", "--principal", "alice"}, "own: not signed in"},
	} {
		if got := run(c.args...); !strings.Contains(got, c.want) {
			t.Errorf("%q = %q, want it to contain %q", c.args, got, c.want)
		}
	}
	if rec, err := store.Load("other", "https://other.example.com/mcp"); err != nil || rec == nil {
		t.Errorf("the shared tokens after a principal's logout: %v, %v", rec, err)
	}
}
