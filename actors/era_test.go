package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// scriptTransport answers each request with reply(method, params) and
// records what it was sent.
type scriptTransport struct {
	mu    sync.Mutex
	sent  []transport.JSONRPCRequest
	reply func(method string, params map[string]json.RawMessage) (json.RawMessage, *mcp.JSONRPCErrorDetails)
}

func (s *scriptTransport) Start(context.Context) error { return nil }
func (s *scriptTransport) SendRequest(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	s.mu.Lock()
	s.sent = append(s.sent, req)
	s.mu.Unlock()
	raw, _ := json.Marshal(req.Params)
	var params map[string]json.RawMessage
	_ = json.Unmarshal(raw, &params)
	res, rpcErr := s.reply(req.Method, params)
	if rpcErr != nil {
		return &transport.JSONRPCResponse{JSONRPC: "2.0", ID: req.ID, Error: rpcErr}, nil
	}
	return &transport.JSONRPCResponse{JSONRPC: "2.0", ID: req.ID, Result: res}, nil
}
func (s *scriptTransport) SendNotification(context.Context, mcp.JSONRPCNotification) error {
	return nil
}
func (s *scriptTransport) SetNotificationHandler(func(mcp.JSONRPCNotification)) {}
func (s *scriptTransport) Close() error                                         { return nil }
func (s *scriptTransport) GetSessionId() string                                 { return "" }

func (s *scriptTransport) methods() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.sent {
		out = append(out, r.Method)
	}
	return out
}

// TestModernRequest: a modern connection's request gets the revision's
// _meta beside the caller's own keys, and over HTTP the standard headers
// and the x-mcp-header ones; a legacy connection's request is untouched.
func TestModernRequest(t *testing.T) {
	conn := &serverConn{name: "m", declared: HumanCaps{Form: true}}
	conn.schemas.set(ParseTools([]json.RawMessage{json.RawMessage(
		`{"name":"lookup","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`)}))
	req := transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId("1"), Method: "tools/call",
		Params: map[string]any{"name": "lookup", "arguments": map[string]any{"region": "eu"}, "_meta": map[string]any{"progressToken": "7"}}}
	if got := conn.outgoing(context.Background(), req); got.Header != nil || fmt.Sprint(got.Params) != fmt.Sprint(req.Params) {
		t.Fatalf("a legacy request was changed: %v %v", got.Params, got.Header)
	}
	conn.setProtocol(modernVersion)
	got := conn.outgoing(context.Background(), req)
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	raw, _ := json.Marshal(got.Params)
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"progressToken":                            `"7"`,
		mcp.MetaKeyProtocolVersion:                 `"2026-07-28"`,
		mcp.MetaKeyClientInfo:                      `{"name":"bridge","version":"1"}`,
		mcp.MetaKeyClientCapabilities:              `"elicitation":{"form":{}}`,
		mcp.MetaKeyClientCapabilities + " (tasks)": `"extensions":{"io.modelcontextprotocol/tasks":{}}`,
	} {
		if got := string(p.Meta[strings.TrimSuffix(key, " (tasks)")]); !strings.Contains(got, want) {
			t.Errorf("_meta[%s] = %s, want it to hold %s", key, got, want)
		}
	}
	for name, want := range map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "lookup", "Mcp-Param-Region": "eu"} {
		if got := got.Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
}

// TestModernRefusal: which refusals of initialize send the bridge to
// server/discover.
func TestModernRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		http bool
		want bool
	}{
		{"-32022 naming 2026-07-28", mcp.UnsupportedProtocolVersionError{Supported: []string{"2026-07-28"}}, false, true},
		{"-32022 naming only legacy revisions", mcp.UnsupportedProtocolVersionError{Supported: []string{"2025-06-18"}}, false, false},
		{"-32022 naming nothing", mcp.UnsupportedProtocolVersionError{}, false, false},
		{"HTTP 4xx on initialize", fmt.Errorf("send: %w", transport.ErrLegacySSEServer), true, true},
		{"the same error on stdio", transport.ErrLegacySSEServer, false, false},
		{"another error", errors.New("boom"), true, false},
	} {
		if got := modernRefusal(tc.err, tc.http); got != tc.want {
			t.Errorf("%s: modernRefusal = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// modernConn is a modern connection over script.
func modernConn(script *scriptTransport) *serverConn {
	conn := &serverConn{name: "m", tr: script, child: nil}
	conn.setProtocol(modernVersion)
	return conn
}

// TestFollowInputRequired: input_required rounds are answered and the
// request sent again with the answers and the state; an elicitation with
// no one to ask is declined, sampling is refused with a reason, and a
// server that never stops asking is cut off at MaxInputRounds.
func TestFollowInputRequired(t *testing.T) {
	elicit := `{"resultType":"input_required","requestState":"s1","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"colour?","requestedSchema":{"type":"object","properties":{}}}}}}`
	script := &scriptTransport{reply: func(_ string, p map[string]json.RawMessage) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
		if p["requestState"] == nil {
			return json.RawMessage(elicit), nil
		}
		return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"state %s answer %s"}]}`, p["requestState"], p["inputResponses"])), nil
	}}
	conn := modernConn(script)
	x := &exchange{conn: conn, method: "tools/call", params: map[string]any{"name": "ask"}}
	res, err := conn.requestID(context.Background(), conn.nextID(), x.method, x.params)
	if err == nil {
		res, err = x.follow(context.Background(), res, nil)
	}
	if err != nil || !strings.Contains(string(res), `state "s1" answer {"q":{"action":"decline"}}`) {
		t.Fatalf("follow = %s, %v; want the retry's result with the decline and the state", res, err)
	}

	sampling := `{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}}}`
	script.reply = func(string, map[string]json.RawMessage) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
		return json.RawMessage(sampling), nil
	}
	if _, err := x.follow(context.Background(), json.RawMessage(sampling), nil); err == nil || !strings.Contains(err.Error(), "asked for sampling, which your MCP client did not declare") {
		t.Errorf("undeclared sampling: %v", err)
	}

	script.reply = func(string, map[string]json.RawMessage) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
		return json.RawMessage(elicit), nil
	}
	before := len(script.methods())
	_, err = x.follow(context.Background(), json.RawMessage(elicit), nil)
	if err == nil || !strings.Contains(err.Error(), "asked for input 32 times in one request, the cap") {
		t.Errorf("endless rounds: %v", err)
	}
	if n := len(script.methods()) - before; n != MaxInputRounds {
		t.Errorf("endless rounds sent %d retries, want %d", n, MaxInputRounds)
	}
}

// TestFollowTask: a tools/call that became a 2026-07-28 task is polled
// with tasks/get until it completes, its status relayed as progress; a
// failed task is the server's error; a legacy connection's result is
// never read as one.
func TestFollowTask(t *testing.T) {
	polls := 0
	script := &scriptTransport{reply: func(method string, _ map[string]json.RawMessage) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
		if method != "tasks/get" {
			return nil, &mcp.JSONRPCErrorDetails{Code: mcp.METHOD_NOT_FOUND, Message: method}
		}
		polls++
		if polls < 2 {
			return json.RawMessage(`{"taskId":"t","status":"working","statusMessage":"half","pollIntervalMs":1}`), nil
		}
		return json.RawMessage(`{"taskId":"t","status":"completed","result":{"content":[{"type":"text","text":"done"}]}}`), nil
	}}
	conn := modernConn(script)
	x := &exchange{conn: conn, method: "tools/call"}
	var statuses []string
	created := json.RawMessage(`{"resultType":"task","taskId":"t","status":"working","pollIntervalMs":1}`)
	res, err := x.follow(context.Background(), created, func(u UpstreamProgress) { statuses = append(statuses, u.Status+" "+u.Message) })
	if err != nil || !strings.Contains(string(res), `"done"`) {
		t.Fatalf("follow = %s, %v", res, err)
	}
	if got, want := strings.Join(statuses, "|"), "working |working half|completed "; got != want {
		t.Errorf("statuses %q, want %q", got, want)
	}
	if x.task != "" {
		t.Errorf("a completed task is still marked in flight: %q", x.task)
	}

	script.reply = func(string, map[string]json.RawMessage) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
		return json.RawMessage(`{"taskId":"t","status":"failed","error":{"code":-32603,"message":"disk full"}}`), nil
	}
	if _, err := x.follow(context.Background(), created, nil); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failed task: %v", err)
	}

	legacy := &serverConn{name: "l", tr: script}
	if res, err := (&exchange{conn: legacy, method: "tools/call"}).follow(context.Background(), created, nil); err != nil || string(res) != string(created) {
		t.Errorf("a legacy result was followed: %s, %v", res, err)
	}
}

// TestSkipBadHeaders: over modern HTTP a tool whose x-mcp-header breaks
// the rules (here, on an object) is marked unusable, with the reason; a
// good one is kept.
func TestSkipBadHeaders(t *testing.T) {
	tools := ParseTools([]json.RawMessage{
		json.RawMessage(`{"name":"good","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}`),
		json.RawMessage(`{"name":"bad","inputSchema":{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"O"}}}}`),
	})
	skipBadHeaders(tools)
	if tools[0].Skip != "" || !strings.HasPrefix(tools[1].Skip, "its x-mcp-header annotations are invalid: ") {
		t.Errorf("Skip = %q, %q", tools[0].Skip, tools[1].Skip)
	}
}
