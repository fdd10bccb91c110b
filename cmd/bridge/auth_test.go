package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{[]string{"auth", "logout", "-h"}, 0, "usage: bridge auth logout NAME\n", ""},
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
