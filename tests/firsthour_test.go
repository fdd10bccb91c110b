package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstMistakes checks that the mistakes a model makes in its first
// calls get the fix in the error, with the exception type unchanged, on the
// real everything server: a proxy, mcp_servers key, module or call_tool of
// a configured server the call does not grant; network access; a misspelt
// tool (one suggestion, not two); MCPError as a global; and the reference's
// MCP_AVAILABLE_SERVERS objects and get_memory_info value. Each case failed
// before the change.
func TestFirstMistakes(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything"), "description": "demo tools"},
	}, map[string]string{"MCP_BRIDGE_STATE_DIR": t.TempDir()}))
	const grant = `server 'everything' is configured but not granted to this call; pass servers=["everything"] to run_python`
	cases := []struct {
		name, code string
		servers    []string
		isError    bool
		want       []string
	}{
		{"proxy not granted", "await mcp_everything.echo(message='x')", nil, true,
			[]string{"NameError: name 'mcp_everything' is not defined: " + grant}},
		{"mcp_servers key not granted", "mcp_servers['everything']", nil, true,
			[]string{"KeyError: '" + strings.ReplaceAll(grant, "'", `\'`) + "'"}},
		{"module not granted", "import mcp.servers.everything", nil, true,
			[]string{"ModuleNotFoundError: No module named 'mcp.servers.everything': " + grant}},
		{"call_tool not granted", "await runtime.call_tool('everything', 'echo', {'message': 'x'})", nil, true,
			[]string{"MCPError: Server 'everything' is not available: " + grant}},
		{"call_tool of an unknown server", "await runtime.call_tool('nosuch', 'echo', {})", nil, true,
			[]string{"MCPError: Server 'nosuch' is not available: no server 'nosuch' is configured (runtime.discovered_servers() lists them)"}},
		{"an unknown name is a plain NameError", "mcp_nosuch", nil, true,
			[]string{"NameError: name 'mcp_nosuch' is not defined"}},
		{"MCPError is a global", `try:
    await runtime.call_tool('nosuch', 'echo', {})
except MCPError as e:
    print('caught', e.kind, MCPError is runtime.MCPError)`, nil, false, []string{"caught not_available True"}},
		{"network access names the fix", "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=5)", nil, true,
			[]string{"URLError", "note: the sandbox has no network: reach outside services through a proxied MCP server (runtime.discovered_servers() lists them)"}},
		{"MCP_AVAILABLE_SERVERS holds objects", "import os, json\njson.loads(os.environ['MCP_AVAILABLE_SERVERS'])", []string{"everything"}, false,
			[]string{"[{'name': 'everything', 'alias': 'everything', 'description': 'demo tools'}]"}},
		{"get_memory_info has the value", "save_memory('k', {'a': [1, 2]})\nget_memory_info('k')['value']", nil, false,
			[]string{"{'a': [1, 2]}"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := map[string]any{"code": c.code, "timeout": 60}
			if c.servers != nil {
				args["servers"] = c.servers
			}
			r := b.call(args)
			got := text(t, r)
			if r.IsError != c.isError {
				t.Errorf("isError = %v, want %v: %s", r.IsError, c.isError, got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, w)
				}
			}
		})
	}

	// A misspelt tool: the bridge's suggestion, once.
	r := b.call(map[string]any{"code": "mcp_everything.get_sun", "servers": []string{"everything"}})
	got := text(t, r)
	if !strings.Contains(got, "AttributeError: Server 'everything' has no tool 'get_sun'. Did you mean: get_sum") {
		t.Errorf("misspelt tool: %s", got)
	}
	if n := strings.Count(got, "Did you mean"); n != 1 {
		t.Errorf("misspelt tool: %d suggestions, want 1: %s", n, got)
	}
}

// TestBrokenServerDoesNotFailCall checks that a granted server that is
// disabled or fails to start does not stop the call: the code runs, the
// broken server's names raise MCPError with the cause, and the result says
// which server it was, once. An unknown name still fails before any code
// runs. Before the change, the whole call failed.
func TestBrokenServerDoesNotFailCall(t *testing.T) {
	requirePodman(t)
	env := withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"crash":      map[string]any{"command": "sh", "args": []string{"-c", "echo boom >&2; exit 3"}},
		"old":        map[string]any{"command": npmBin(t, "mcp-server-everything"), "disabled": true},
	}, nil)
	b := startBridge(t, env)
	code := `print(await mcp_everything.get_sum(a=40, b=2))
for name in ('crash', 'old'):
    try:
        await getattr(mcp_servers[name], 'echo')(message='x')
    except MCPError as e:
        print(name, 'raised', e.kind)
import mcp.servers.old as m
try:
    m.echo
except MCPError as e:
    print('module raised')`
	r := b.call(map[string]any{"code": code, "servers": []string{"everything", "crash", "old"}, "timeout": 60})
	got := text(t, r)
	if r.IsError {
		t.Fatalf("the call failed: %s", got)
	}
	for _, want := range []string{
		"42.\ncrash raised not_available\nold raised not_available\nmodule raised",
		"note: server 'crash' failed to start: exit status 3; last stderr: boom; its tools raise MCPError",
		`note: server 'old' is disabled in ` + filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "servers.json") + ` ("disabled": true); its tools raise MCPError`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("result lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "note: server 'crash'"); n != 1 {
		t.Errorf("%d notes about crash, want 1:\n%s", n, got)
	}
	r = b.call(map[string]any{"code": "print('ran')", "servers": []string{"everything", "evrything"}})
	if got := text(t, r); !r.IsError || strings.Contains(got, "ran") || !strings.Contains(got, "Unknown MCP server: evrything; did you mean 'everything'?") {
		t.Errorf("a typo must fail before the code runs: %s", got)
	}
}
