package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPolicyFile checks the policy file end to end: denied and not-allowed
// tools get a clear error and are logged, the per-execution cap holds, a
// per-tool timeout applies, and an edit to the file is seen by the next call.
func TestPolicyFile(t *testing.T) {
	requirePodman(t)
	env := withServers(t, map[string]any{"svc": fake()}, nil)
	dir := env["MCP_BRIDGE_CONFIG_DIR"]
	policy := filepath.Join(dir, "bridge.policy")
	write := func(body string) {
		if err := os.WriteFile(policy, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"maxToolCallsPerExecution": 3, "servers": {"svc": {"allow": ["add", "echo", "sleep"], "deny": ["echo"], "timeouts": {"sleep": 1}}}}`)
	b := startBridge(t, env)
	cases := []struct{ code, want string }{
		{"await mcp_svc.add(1, 2)", "{'sum': 3}"},
		{"await mcp_svc.echo('x')", "MCPError: Tool svc.echo is denied by the policy (" + policy + ")"},
		{"await mcp_svc.counter()", "MCPError: Tool svc.counter is not allowed by the policy (" + policy + ")"},
		{"for i in range(3):\n    await mcp_svc.add(i, i)\nawait mcp_svc.add(9, 9)", "MCPError: Tool call limit of 3 per execution reached (maxToolCallsPerExecution in " + policy + ")"},
		{"await mcp_svc.sleep(10)", "MCPError: Tool call svc.sleep timed out after 1s (timeouts in " + policy + ")"},
	}
	for _, c := range cases {
		start := time.Now()
		r := b.call(map[string]any{"code": c.code, "servers": []string{"svc"}, "timeout": 20})
		if got := text(t, r); !strings.Contains(got, c.want) {
			t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, c.want)
		}
		if time.Since(start) > 8*time.Second {
			t.Errorf("%s took %v", c.code, time.Since(start))
		}
	}
	if logs := b.stderr.String(); !strings.Contains(logs, "Tool svc.echo is denied by the policy") {
		t.Errorf("the denied call was not logged")
	}
	// A broken policy fails closed; fixing it restores calls.
	write(`{"servers": {`)
	r := b.call(map[string]any{"code": "await mcp_svc.add(1, 1)", "servers": []string{"svc"}})
	if got := text(t, r); !strings.Contains(got, "Tool calls are disabled: the policy file "+policy+" is invalid") {
		t.Errorf("broken policy: %s", got)
	}
	if err := os.Remove(policy); err != nil {
		t.Fatal(err)
	}
	if got := b.mustOK("await mcp_svc.echo('back')", "svc"); got != "'back'" {
		t.Errorf("without a policy: %s", got)
	}
}

// TestPolicyDenyCrossesSlash: a deny pattern's '*' matches across '/' and
// '.' in tool names, which MCP allows: with "*delete*" denied on every
// server, a tool named admin/delete_all is refused before it reaches the
// server, while admin/list.v1-x, matched by no rule, still runs.
func TestPolicyDenyCrossesSlash(t *testing.T) {
	requirePodman(t)
	env := withServers(t, map[string]any{"svc": fake("--extra-tools", "admin/delete_all,admin/list.v1-x")}, nil)
	policy := filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy")
	if err := os.WriteFile(policy, []byte(`{"servers": {"*": {"deny": ["*delete*"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, env)
	cases := []struct{ code, want string }{
		{"(await runtime.call_tool('svc', 'admin/list.v1-x', {}))['content'][0]['text']", "'called admin/list.v1-x'"},
		{"await runtime.call_tool('svc', 'admin/delete_all', {})", "MCPError: Tool svc.admin/delete_all is denied by the policy (" + policy + ")"},
	}
	for _, c := range cases {
		r := b.call(map[string]any{"code": c.code, "servers": []string{"svc"}, "timeout": 20})
		if got := text(t, r); !strings.Contains(got, c.want) {
			t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, c.want)
		}
	}
}
