package actors

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// noStore is a catalog store that keeps nothing.
type noStore struct{}

func (noStore) Load(string) (ServerCatalog, bool) { return ServerCatalog{}, false }
func (noStore) Save(string, ServerCatalog)        {}

// fakeHTTPServer is an in-process streamable-HTTP MCP server: echo answers
// "ok"; liar fails with a message that reads like the bridge's own timeout;
// slow answers when the test ends.
func fakeHTTPServer(t *testing.T) ServerSpec {
	t.Helper()
	s := server.NewMCPServer("fake", "1")
	s.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	s.AddTool(mcp.NewTool("liar"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("upstream timed out after 5s")
	})
	release := make(chan struct{})
	s.AddTool(mcp.NewTool("slow"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return mcp.NewToolResultText("late"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // runs first: slow returns, hs closes
	return ServerSpec{Name: "fake", Type: "http", URL: hs.URL + "/mcp", Hash: "h"}
}

// startClient runs a client actor under its own supervisor until the test
// ends.
func startClient(t *testing.T, spec ServerSpec, onTools func(name, hash string, tools []ToolInfo)) *Client {
	t.Helper()
	deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Store: noStore{}, OnTools: onTools, Log: zerolog.Nop()}
	c := NewClient(spec, deps)
	sup := quietSupervisor("client-test")
	sup.Add(c)
	serveUntilCleanup(t, sup)
	return c
}

// knownStore has a (empty) catalog for every server, so a client starts its
// server on first use, not in the background as soon as it runs.
type knownStore struct{ noStore }

func (knownStore) Load(string) (ServerCatalog, bool) { return ServerCatalog{}, true }

// TestClientRestartsCleanAfterPanic: suture restarts a client actor that
// panicked; the restarted actor starts a fresh connection instead of handing
// callers the one its last run closed (issue 14).
func TestClientRestartsCleanAfterPanic(t *testing.T) {
	var panicked atomic.Bool
	// A disk catalog, so the server starts on the call below only: without
	// one the actor starts it in the background at once, and the panic
	// could come (and the restart end) before the call is made.
	deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Store: knownStore{}, Log: zerolog.Nop(),
		OnTools: func(string, string, []ToolInfo) {
			if panicked.CompareAndSwap(false, true) {
				panic("test: the actor panics while its server starts")
			}
		}}
	c := NewClient(fakeHTTPServer(t), deps)
	sup := quietSupervisor("client-test")
	sup.Add(c)
	serveUntilCleanup(t, sup)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, "echo", nil, 5*time.Second, "test", nil); err == nil {
		t.Fatal("the call the actor panicked on succeeded; want an error")
	}
	got, err := c.Call(ctx, "echo", nil, 5*time.Second, "test", nil)
	if err != nil {
		t.Fatalf("call after the restart: %v", err)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(got, &res); err != nil || res.IsError {
		t.Fatalf("call after the restart: %s (%v)", got, err)
	}
}

// TestToolErrorTextIsNotTimeout: a server's error that reads like a timeout
// is a server error; only the bridge's own deadline is a timeout (issue 14).
func TestToolErrorTextIsNotTimeout(t *testing.T) {
	c := startClient(t, fakeHTTPServer(t), func(string, string, []ToolInfo) {})
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
	<-r.publish(catalogSource{specs: []ServerSpec{c.Spec()}, clients: map[string]*Client{"fake": c}, tools: map[string][]ToolInfo{"fake": tools}})
	scope := Scope{Servers: []string{"fake"}}
	for _, tc := range []struct {
		tool    string
		timeout time.Duration
		want    string
	}{
		{"liar", 5 * time.Second, protocol.KindServerError},
		{"slow", 100 * time.Millisecond, protocol.KindTimeout},
	} {
		r.CallTimeout = tc.timeout
		_, err := r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(`{"server":"fake","tool":"`+tc.tool+`"}`))
		var je *jsonrpc2.Error
		if !errors.As(err, &je) || je.Data == nil {
			t.Fatalf("%s: got %v, want a link error", tc.tool, err)
		}
		var data protocol.ErrorData
		if err := json.Unmarshal(*je.Data, &data); err != nil {
			t.Fatal(err)
		}
		if got := data.Kind; got != tc.want {
			t.Errorf("%s: kind %q (%s), want %q", tc.tool, got, je.Message, tc.want)
		}
	}
}
