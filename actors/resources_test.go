package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

func TestPolicyResourcesAllowed(t *testing.T) {
	off, on := false, true
	for _, tc := range []struct {
		name    string
		servers map[string]ServerPolicy
		want    bool
	}{
		{"no rules", nil, true},
		{"off for the server", map[string]ServerPolicy{"a": {Resources: &off}}, false},
		{"off for every server", map[string]ServerPolicy{"*": {Resources: &off}}, false},
		{"the server's own entry wins", map[string]ServerPolicy{"*": {Resources: &off}, "a": {Resources: &on}}, true},
		{"another server's rule", map[string]ServerPolicy{"b": {Resources: &off}}, true},
		{"an entry without the switch", map[string]ServerPolicy{"a": {Deny: []string{"x"}}, "*": {Resources: &off}}, false},
	} {
		p, err := NewPolicy("/p", 0, tc.servers)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.ResourcesAllowed("a") == nil; got != tc.want {
			t.Errorf("%s: allowed %v, want %v", tc.name, got, tc.want)
		}
	}
	if err := (&Policy{Source: "/p", Err: errors.New("bad")}).ResourcesAllowed("a"); err == nil {
		t.Error("an invalid policy allows resources; want it to fail closed")
	}
}

// resourceServer is an in-process HTTP MCP server with three resources
// (one page each) and a big one; reads counts its resources/read calls.
func resourceHTTPServer(t *testing.T, reads *atomic.Int64) ServerSpec {
	t.Helper()
	s := server.NewMCPServer("res", "1", server.WithResourceCapabilities(false, false), server.WithToolCapabilities(false), server.WithPaginationLimit(1))
	for i := 1; i <= 3; i++ {
		uri := fmt.Sprintf("mem://%d", i)
		s.AddResource(mcp.NewResource(uri, fmt.Sprintf("r%d", i)), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			reads.Add(1)
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: "text " + uri}}, nil
		})
	}
	s.AddResource(mcp.NewResource("mem://big", "big"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		reads.Add(1)
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: "mem://big", Text: strings.Repeat("x", 1<<20)}}, nil
	})
	s.AddResourceTemplate(mcp.NewResourceTemplate("mem://{id}", "by id"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return nil, errors.New("no such resource")
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return ServerSpec{Name: "res", Type: "http", URL: hs.URL + "/mcp", Hash: "h"}
}

// linkKind is the kind and message of a link error.
func linkKind(t *testing.T, err error) (string, string) {
	t.Helper()
	var je *jsonrpc2.Error
	if !errors.As(err, &je) || je.Data == nil {
		t.Fatalf("got %v, want a link error", err)
	}
	var data protocol.ErrorData
	if err := json.Unmarshal(*je.Data, &data); err != nil {
		t.Fatal(err)
	}
	return data.Kind, je.Message
}

// TestRouterResources: list_resources gathers every page, read_resource
// returns the server's contents; a server the call does not grant, a
// policy with "resources": false, the cap on calls per execution and a
// reply over the frame cap are refused before or instead of reaching the
// sandbox.
func TestRouterResources(t *testing.T) {
	var reads atomic.Int64
	c := startClient(t, resourceHTTPServer(t, &reads), func(string, string, []ToolInfo) {})
	r := NewRouter()
	r.CallTimeout, r.MaxFrame, r.Log = 5*time.Second, 256<<10, zerolog.Nop()
	sup := quietSupervisor("router-test")
	sup.Add(r)
	serveUntilCleanup(t, sup)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	publish := func(p *Policy) {
		<-r.publish(catalogSource{specs: []ServerSpec{c.Spec()}, clients: map[string]*Client{"res": c}, tools: map[string][]ToolInfo{"res": nil}, policy: p})
	}
	publish(nil)
	scope := Scope{Servers: []string{"res"}, ToolCalls: new(atomic.Int64)}

	got, err := r.ServeSandbox(ctx, scope, protocol.MethodListResources, json.RawMessage(`{"server":"res"}`))
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(got); strings.Count(string(raw), `"uri"`) != 4 {
		t.Errorf("list_resources: %s, want the 4 resources of 4 pages", raw)
	}
	got, err = r.ServeSandbox(ctx, scope, protocol.MethodListResourceTemplates, json.RawMessage(`{"server":"res"}`))
	if raw, _ := json.Marshal(got); err != nil || !strings.Contains(string(raw), `"uriTemplate":"mem://{id}"`) {
		t.Errorf("list_resource_templates: %s %v", raw, err)
	}
	got, err = r.ServeSandbox(ctx, scope, protocol.MethodReadResource, json.RawMessage(`{"server":"res","uri":"mem://2"}`))
	if raw, _ := json.Marshal(got); err != nil || !strings.Contains(string(raw), `"text":"text mem://2"`) {
		t.Errorf("read_resource: %s %v", raw, err)
	}

	refused := func(name string, scope Scope, params, kind, msg string) {
		t.Helper()
		before := reads.Load()
		_, err := r.ServeSandbox(ctx, scope, protocol.MethodReadResource, json.RawMessage(params))
		if gotKind, gotMsg := linkKind(t, err); gotKind != kind || !strings.Contains(gotMsg, msg) {
			t.Errorf("%s: %s %q, want %s containing %q", name, gotKind, gotMsg, kind, msg)
		}
		if name != "over the frame cap" && reads.Load() != before {
			t.Errorf("%s: the read reached the server", name)
		}
	}
	refused("not granted", Scope{Servers: []string{"other"}}, `{"server":"res","uri":"mem://1"}`, protocol.KindNotAvailable, "not granted to this call")
	refused("no uri", scope, `{"server":"res","uri":""}`, protocol.KindInvalidArguments, "Missing resource uri")
	refused("over the frame cap", scope, `{"server":"res","uri":"mem://big"}`, protocol.KindServerError, "over the 262144-byte frame limit (MCP_BRIDGE_MAX_FRAME_BYTES)")

	off := false
	p, err := NewPolicy("/cfg/bridge.policy", 0, map[string]ServerPolicy{"res": {Resources: &off}})
	if err != nil {
		t.Fatal(err)
	}
	publish(p)
	refused("turned off", scope, `{"server":"res","uri":"mem://1"}`, protocol.KindNotAvailable, `"resources": false in /cfg/bridge.policy`)
	if _, err := r.ServeSandbox(ctx, scope, protocol.MethodListResources, json.RawMessage(`{"server":"res"}`)); err == nil {
		t.Error("list_resources with resources turned off: no error")
	}

	capped, err := NewPolicy("/cfg/bridge.policy", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish(capped)
	scope.ToolCalls = new(atomic.Int64)
	for i := 0; i < 2; i++ {
		if _, err := r.ServeSandbox(ctx, scope, protocol.MethodReadResource, json.RawMessage(`{"server":"res","uri":"mem://1"}`)); err != nil {
			t.Fatalf("read %d within the cap: %v", i+1, err)
		}
	}
	refused("over the call cap", scope, `{"server":"res","uri":"mem://1"}`, protocol.KindNotAvailable, "Tool call limit of 2 per execution reached")
}
