package actors

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol"
)

// argRouter serves one server, "my-srv" (alias my_srv), whose tools are
// get-sum(a, b) (alias get_sum) with a closed schema and open(a) whose
// schema lets any name through. Every call that reaches it adds to calls.
func argRouter(t *testing.T, calls *atomic.Int64) *Router {
	t.Helper()
	s := server.NewMCPServer("my-srv", "1")
	count := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return mcp.NewToolResultText("ok"), nil
	}
	s.AddTool(mcp.NewToolWithRawSchema("get-sum", "Adds.", json.RawMessage(
		`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)), count)
	s.AddTool(mcp.NewToolWithRawSchema("open", "Takes anything.", json.RawMessage(
		`{"type":"object","properties":{"a":{"type":"number"}},"additionalProperties":true}`)), count)
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	c := startClient(t, ServerSpec{Name: "my-srv", Type: "http", URL: hs.URL + "/mcp", Hash: "h"}, func(string, string, []ToolInfo) {})
	r := NewRouter()
	r.CallTimeout = 5 * time.Second
	r.Log = zerolog.Nop()
	sup := quietSupervisor("router-test")
	sup.Add(r)
	serveUntilCleanup(t, sup)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-r.publish(catalogSource{specs: []ServerSpec{c.Spec()}, clients: map[string]*Client{"my-srv": c},
		tools: map[string][]ToolInfo{"my-srv": tools}})
	return r
}

// TestCallToolArgumentNames: call_tool refuses an argument a closed schema
// does not declare and a missing required one, naming it, the closest
// declared name and the signature, before anything reaches the server;
// validate false skips the check; an open schema passes any name; the
// server and the tool may be named by their aliases (issue 35).
func TestCallToolArgumentNames(t *testing.T) {
	var calls atomic.Int64
	r := argRouter(t, &calls)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	scope := Scope{Servers: []string{"my-srv"}}
	for _, tc := range []struct {
		name, params string
		wantKind     string // "" for a call that reaches the server
		wantMsg      string
	}{
		{"declared", `{"server":"my-srv","tool":"get-sum","arguments":{"a":1,"b":2}}`, "", ""},
		{"undeclared", `{"server":"my-srv","tool":"get-sum","arguments":{"a":1,"b":2,"c":3}}`, protocol.KindInvalidArguments,
			"Invalid arguments for my-srv.get-sum: unexpected argument 'c'; get_sum(a: number, b: number)"},
		{"misspelt", `{"server":"my-srv","tool":"get-sum","arguments":{"a":1,"bb":2}}`, protocol.KindInvalidArguments,
			"Invalid arguments for my-srv.get-sum: unexpected argument 'bb'; did you mean 'b'? get_sum(a: number, b: number)"},
		{"missing", `{"server":"my-srv","tool":"get-sum","arguments":{"a":1}}`, protocol.KindInvalidArguments,
			"Invalid arguments for my-srv.get-sum: missing required argument 'b'; get_sum(a: number, b: number)"},
		{"wrong type", `{"server":"my-srv","tool":"get-sum","arguments":{"a":"x","b":2}}`, protocol.KindInvalidArguments,
			"Invalid arguments for my-srv.get-sum: at '/a': got string, want number; expected: get_sum(a: number, b: number)"},
		{"validate false", `{"server":"my-srv","tool":"get-sum","arguments":{"a":1,"b":2,"c":3},"validate":false}`, "", ""},
		{"validate false, wrong type", `{"server":"my-srv","tool":"get-sum","arguments":{"a":"x"},"validate":false}`, "", ""},
		{"validate true", `{"server":"my-srv","tool":"get-sum","arguments":{"a":1,"b":2,"c":3},"validate":true}`, protocol.KindInvalidArguments,
			"Invalid arguments for my-srv.get-sum: unexpected argument 'c'; get_sum(a: number, b: number)"},
		{"open schema", `{"server":"my-srv","tool":"open","arguments":{"zz":1}}`, "", ""},
		{"tool alias", `{"server":"my-srv","tool":"get_sum","arguments":{"a":1,"b":2}}`, "", ""},
		{"server alias", `{"server":"my_srv","tool":"get-sum","arguments":{"a":1,"b":2}}`, "", ""},
		{"both aliases", `{"server":"my_srv","tool":"get_sum","arguments":{"a":1,"b":2}}`, "", ""},
		{"an alias, a wrong argument", `{"server":"my_srv","tool":"get_sum","arguments":{"a":1,"b":2,"c":3}}`, protocol.KindInvalidArguments,
			"Invalid arguments for my-srv.get-sum: unexpected argument 'c'; get_sum(a: number, b: number)"},
		{"an alias in another case", `{"server":"my_srv","tool":"GET_SUM","arguments":{"a":1,"b":2}}`, protocol.KindNotFound,
			"Server 'my-srv' has no tool 'GET_SUM'. Did you mean: get-sum?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := calls.Load()
			_, err := r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(tc.params))
			if tc.wantKind == "" {
				if err != nil {
					t.Fatalf("got %v, want the call to reach the server", err)
				}
			} else {
				kind, msg := linkKind(t, err)
				if kind != tc.wantKind || msg != tc.wantMsg {
					t.Errorf("got %s: %s\nwant %s: %s", kind, msg, tc.wantKind, tc.wantMsg)
				}
			}
			if got, want := calls.Load()-before, int64(map[bool]int{true: 1}[tc.wantKind == ""]); got != want {
				t.Errorf("%d calls reached the server, want %d", got, want)
			}
		})
	}
}
