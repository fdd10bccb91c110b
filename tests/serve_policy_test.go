package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServePolicyPrincipals: per-principal grants narrow what the
// top-level policy allows, on a real proxied server, and the proxied calls
// are counted per server.
func TestServePolicyPrincipals(t *testing.T) {
	env := withServers(t, map[string]any{"svc": fake(), "other": fake()}, nil)
	policy := filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy")
	if err := os.WriteFile(policy, []byte(`{"servers": {"*": {"deny": ["echo"]}},
		"principals": {"alice": {"servers": {"svc": {"allow": ["add", "echo"]}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env["MCP_BRIDGE_TOKENS_FILE"] = writeTokens(t, "alice "+aliceToken, "bob "+bobToken)
	s := startServe(t, env)
	alice, bob := s.mustClient(aliceToken), s.mustClient(bobToken)
	for _, c := range []struct {
		who, code, want string
	}{
		{"alice", "print(await mcp_svc.add(1, 2))", "{'sum': 3}"},
		{"alice", "await mcp_svc.counter()", "Tool svc.counter is not allowed by the policy (" + policy + ") (principal alice)"},
		{"alice", "await mcp_svc.echo('x')", "Tool svc.echo is denied by the policy"},
		{"alice", "await mcp_other.add(1, 2)", "Server other is not granted to principal alice"},
		{"bob", "print(await mcp_svc.counter())", "1"},
		{"bob", "print(await mcp_other.add(2, 2))", "{'sum': 4}"},
		{"bob", "await mcp_svc.echo('x')", "Tool svc.echo is denied by the policy"},
	} {
		c2 := alice
		if c.who == "bob" {
			c2 = bob
		}
		r := callHTTP(t, c2, map[string]any{"code": c.code, "servers": []string{"svc", "other"}})
		got := text(t, r)
		if strings.HasPrefix(c.code, "print(") && (got != c.want || r.IsError) || !strings.Contains(got, c.want) {
			t.Errorf("%s: %s\n got: %s\nwant (containing, or exactly for a print): %s", c.who, c.code, got, c.want)
		}
	}
	_, _, body := s.raw("GET", "/metrics", "", bearerHeader(aliceToken))
	for _, want := range []string{`bridge_proxied_calls_total{server="svc"} 2`, `bridge_proxied_calls_total{server="other"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
