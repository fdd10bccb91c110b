package actors

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// TestRouterNotLoaded checks how the router answers for a configured
// server that is not in the catalog: a project server not approved, and a
// disabled one. A call granting either still runs, with a note that names
// the fix and proxies that raise it; describe_server and call_tool answer
// with the same line; detailed discovery lists them; a typo still fails.
func TestRouterNotLoaded(t *testing.T) {
	const unapproved = "server 'proj' comes from the project file /p/.mcp.json and is not approved: approve it in Claude Code (/mcp), or set MCP_BRIDGE_PROJECT_SERVERS=all"
	r := NewRouter()
	r.Skipped = func() []ConfigProblem {
		return []ConfigProblem{
			{File: "/p/.mcp.json", Entry: "proj", Reason: "not approved: approve it in Claude Code (/mcp), or set MCP_BRIDGE_PROJECT_SERVERS=all", Unapproved: true},
			{File: "/c/x.json", Entry: "old", Reason: "disabled", Disabled: true},
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	servers, notes, err := r.Resolve(ctx, r.Snapshot(), []string{"proj", "old"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	wantNotes := []string{unapproved + "; its tools raise MCPError", `server 'old' is disabled in /c/x.json ("disabled": true); its tools raise MCPError`}
	if len(notes) != 2 || notes[0] != wantNotes[0] || notes[1] != wantNotes[1] {
		t.Errorf("notes = %q\nwant    %q", notes, wantNotes)
	}
	if len(servers) != 2 || servers[0].Error != unapproved || len(servers[0].Tools) != 0 || servers[0].Alias == "" {
		t.Errorf("unapproved server = %+v", servers)
	}
	if _, _, err := r.Resolve(ctx, r.Snapshot(), []string{"projj"}); err == nil || !strings.Contains(err.Error(), "Unknown MCP server: projj") || strings.Contains(err.Error(), "Skipped config") {
		t.Errorf("typo: %v", err)
	}

	scope := Scope{Servers: []string{"proj"}}
	for _, c := range []struct{ method, params string }{
		{protocol.MethodDescribeServer, `{"name": "proj"}`},
		{protocol.MethodQueryToolDocs, `{"server": "proj"}`},
		{protocol.MethodCallTool, `{"server": "proj", "tool": "echo"}`},
		{protocol.MethodCallTool, `{"server": "proj", "tool": "echo"}`}, // also for a call that does not grant it
	} {
		_, err := r.ServeSandbox(ctx, scope, c.method, json.RawMessage(c.params))
		var le *jsonrpc2.Error
		if !errors.As(err, &le) || le.Message != unapproved || le.Code != protocol.CodeNotAvailable {
			t.Errorf("%s: %v, want %q", c.method, err, unapproved)
		}
		scope = Scope{}
	}

	res, err := r.ServeSandbox(ctx, Scope{}, protocol.MethodDiscoveredServers, json.RawMessage(`{"detailed": true}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res)
	if want := `{"file":"/p/.mcp.json","name":"proj","skipped":"not approved: approve it in Claude Code (/mcp), or set MCP_BRIDGE_PROJECT_SERVERS=all"}`; !strings.Contains(string(raw), want) {
		t.Errorf("discovered_servers(detailed=True) = %s, lacks %s", raw, want)
	}
	res, _ = r.ServeSandbox(ctx, Scope{}, protocol.MethodDiscoveredServers, nil)
	if raw, _ := json.Marshal(res); string(raw) != `{"servers":[]}` {
		t.Errorf("discovered_servers() = %s, want only the servers that can start", raw)
	}
}
