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

// TestServePrincipalKeys: the keys of a principal's own rules hold for it
// alone, on a real proxied server (issue 36): approve gates its calls
// through the proxy, runtime.call_tool, a job and a saved tool loaded by a
// fresh container alike (a client without elicitation is refused, naming
// the rule), resources false refuses its
// resources, and its maxToolCallsPerExecution caps its calls; another
// principal is untouched.
func TestServePrincipalKeys(t *testing.T) {
	env := withServers(t, map[string]any{"svc": fake()}, nil)
	policy := filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy")
	if err := os.WriteFile(policy, []byte(`{"principals": {"bob": {"maxToolCallsPerExecution": 2,
		"servers": {"svc": {"approve": ["add"], "resources": false}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env["MCP_BRIDGE_TOKENS_FILE"] = writeTokens(t, "alice "+aliceToken, "bob "+bobToken)
	s := startServe(t, env)
	alice, bob := s.mustClient(aliceToken), s.mustClient(bobToken)
	gated := "Tool svc.add needs a human's approval (gated by approve in principals.bob.servers.svc of " + policy + ")"
	for _, c := range []struct {
		who, code, want string
	}{
		{"bob", "await mcp_svc.add(1, 2)", gated},
		{"bob", `await runtime.call_tool("svc", "add", {"a": 1, "b": 2})`, gated},
		{"bob", "job = runtime.start(mcp_svc.add(1, 2))\nprint(runtime.result(job, wait=30))", gated},
		{"bob", "async def add3():\n    return await mcp_svc.add(1, 2)\nprint(save_tool(add3))\nruntime.reset()", "saved"},
		{"bob", "await add3()", gated},
		{"bob", `await runtime.list_resources("svc")`, "Resources of server 'svc' are turned off by the policy"},
		{"bob", "for i in range(3): await mcp_svc.counter()", "Tool call limit of 2 per execution reached"},
		{"alice", "print(await mcp_svc.add(1, 2))", "{'sum': 3}"},
		{"alice", `print(len(await runtime.list_resources("svc")) > 0)`, "True"},
		{"alice", "for i in range(3): await mcp_svc.counter()\nprint('ok')", "ok"},
	} {
		c2 := alice
		if c.who == "bob" {
			c2 = bob
		}
		r := callHTTP(t, c2, map[string]any{"code": c.code, "servers": []string{"svc"}})
		got := text(t, r)
		if !strings.Contains(got, c.want) || (c.who == "alice" || c.want == "saved") == r.IsError {
			t.Errorf("%s: %s\n got: %s\nwant containing: %s", c.who, c.code, got, c.want)
		}
	}
}
