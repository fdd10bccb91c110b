package actors

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// noteSink is a humanSource whose notes the test reads.
type noteSink struct {
	asks  *approvals
	mu    sync.Mutex
	notes []string
}

func (n *noteSink) approvals(context.Context) (*approvals, error) { return n.asks, nil }
func (n *noteSink) current() *approvals                           { return n.asks }
func (n *noteSink) note(msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, msg)
}

func (n *noteSink) all() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.notes, "\n")
}

func elicitReq(meta string) transport.JSONRPCRequest {
	params := map[string]any{"message": "Name?", "requestedSchema": map[string]any{"type": "object",
		"properties": map[string]any{"name": map[string]any{"type": "string"}}}}
	if meta != "" {
		params["_meta"] = map[string]any{mcp.RelatedTaskMetaKey: map[string]any{"taskId": meta}}
	}
	return transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1)), Method: "elicitation/create", Params: params}
}

// TestRelayAttribution: an upstream question reaches the human of the one
// call in flight, or of the call its related-task names; with several
// calls in flight and no task it is declined, and every call gets a note;
// without the capability declared the server gets -32601.
func TestRelayAttribution(t *testing.T) {
	ctx := context.Background()
	mk := func(tool string, answer string) (*innerCall, *noteSink, *fakeHuman) {
		h := &fakeHuman{caps: HumanCaps{Form: true}, answer: func() (*mcp.ElicitationResult, error) {
			return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
				Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": answer}}}, nil
		}}
		sink := &noteSink{asks: newApprovals(h)}
		return &innerCall{server: "fake", tool: tool, ctx: ctx, src: sink}, sink, h
	}
	result := func(t *testing.T, resp *transport.JSONRPCResponse) string {
		t.Helper()
		if resp.Error != nil {
			return "error " + resp.Error.Message
		}
		return string(resp.Result)
	}
	conn := &serverConn{name: "fake", declared: HumanCaps{Form: true}, relayBound: time.Second}

	a, aNotes, aHuman := mk("ask", "Ada")
	doneA := conn.calls.add(a)
	resp, err := conn.handleRequest(ctx, elicitReq(""))
	if err != nil {
		t.Fatal(err)
	}
	if got := result(t, resp); !strings.Contains(got, `"Ada"`) {
		t.Errorf("one call in flight: %s, want its human's answer", got)
	}
	if got := aHuman.asked[0].Params.Message; got != "fake.ask asks: Name?" {
		t.Errorf("relayed message %q: want the server and tool named", got)
	}

	b, bNotes, bHuman := mk("block", "Bob")
	doneB := conn.calls.add(b)
	resp, _ = conn.handleRequest(ctx, elicitReq(""))
	if got := result(t, resp); !strings.Contains(got, `"decline"`) {
		t.Errorf("two calls in flight: %s, want a decline", got)
	}
	if !strings.Contains(aNotes.all(), "could not tell") || !strings.Contains(bNotes.all(), "could not tell") {
		t.Errorf("notes %q / %q: want both calls told", aNotes.all(), bNotes.all())
	}
	if bHuman.count() != 0 || aHuman.count() != 1 {
		t.Errorf("a human was asked with two calls in flight")
	}

	unbind := conn.BindTask(context.WithValue(ctx, innerKey{}, b), "task-1")
	resp, _ = conn.handleRequest(ctx, elicitReq("task-1"))
	if got := result(t, resp); !strings.Contains(got, `"Bob"`) {
		t.Errorf("a request naming its task: %s, want the task's call's human", got)
	}
	unbind()
	resp, _ = conn.handleRequest(ctx, elicitReq("task-1"))
	if got := result(t, resp); !strings.Contains(got, `"decline"`) {
		t.Errorf("after unbind: %s, want a decline", got)
	}
	doneB()

	undeclared := &serverConn{name: "fake"}
	undeclared.calls.add(a)
	resp, _ = undeclared.handleRequest(ctx, elicitReq(""))
	if resp.Error == nil || resp.Error.Code != mcp.METHOD_NOT_FOUND || !strings.Contains(aNotes.all(), "-32601") {
		t.Errorf("undeclared: %+v, notes %q: want -32601 and a note", resp, aNotes.all())
	}
	doneA()

	resp, _ = conn.handleRequest(ctx, transport.JSONRPCRequest{ID: mcp.NewRequestId(int64(2)), Method: "roots/list"})
	if resp.Error == nil || resp.Error.Code != mcp.METHOD_NOT_FOUND {
		t.Errorf("roots/list: %+v, want -32601", resp)
	}
}

// TestCapsKeyAndDeclared: the catalog key and the initialize capabilities
// follow the client's declared set, never more.
func TestCapsKeyAndDeclared(t *testing.T) {
	for _, tc := range []struct {
		in      mcp.ClientCapabilities
		key     string
		declare string
	}{
		{mcp.ClientCapabilities{}, "", `{}`},
		{mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}, "-ef", `{"elicitation":{"form":{}}}`},
		{mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{URL: &struct{}{}}}, "-eu", `{"elicitation":{"url":{}}}`},
		{mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}, Sampling: &mcp.SamplingCapability{}}, "-efeus",
			`{"sampling":{},"elicitation":{"form":{},"url":{}}}`},
	} {
		c := CapsOf(tc.in)
		if got := c.key(); got != tc.key {
			t.Errorf("key(%+v) = %q, want %q", c, got, tc.key)
		}
		raw, _ := json.Marshal(c.declared())
		if string(raw) != tc.declare {
			t.Errorf("declared(%+v) = %s, want %s", c, raw, tc.declare)
		}
	}
	u := NewUpstreamCaps()
	u.Expect()
	go func() {
		time.Sleep(50 * time.Millisecond)
		u.Set(HumanCaps{Form: true})
	}()
	if got := u.get(context.Background()); !got.Form {
		t.Errorf("a start waiting for the client's initialize got %+v", got)
	}
	if got := NewUpstreamCaps().get(context.Background()); got.Form {
		t.Errorf("a set never expected is empty, got %+v", got)
	}
}

// TestRelayInput: a task's input_required question reaches the human of
// the inner call of ctx, named by server and tool; without one it is a
// decline.
func TestRelayInput(t *testing.T) {
	h := &fakeHuman{caps: HumanCaps{Form: true}, answer: accept("x")}
	sink := &noteSink{asks: newApprovals(h)}
	ctx := context.WithValue(context.Background(), innerKey{}, &innerCall{server: "srv", tool: "job", src: sink})
	p := mcp.ElicitationParams{Message: "Go on?", RequestedSchema: map[string]any{"type": "object"}}
	if got := RelayInput(ctx, time.Second, p); got.Action != mcp.ElicitationResponseActionAccept {
		t.Errorf("with a human: %+v, want the answer", got)
	}
	if msg := h.asked[0].Params.Message; msg != "srv.job asks: Go on?" {
		t.Errorf("message %q", msg)
	}
	if got := RelayInput(context.Background(), time.Second, p); got.Action != mcp.ElicitationResponseActionDecline {
		t.Errorf("without an inner call: %+v, want a decline", got)
	}
	p.Mode = mcp.ElicitationModeURL
	if got := RelayInput(ctx, time.Second, p); got.Action != mcp.ElicitationResponseActionDecline || !strings.Contains(sink.all(), "url mode") {
		t.Errorf("URL mode to a form-only client: %+v, notes %q; want a decline and a note", got, sink.all())
	}
}

// relayConn is a connection of server "fake" with one call in flight,
// fake.ask, whose human is h; done unregisters the call.
func relayConn(h Human, declared HumanCaps) (conn *serverConn, sink *noteSink, done func()) {
	sink = &noteSink{asks: newApprovals(h)}
	conn = &serverConn{name: "fake", declared: declared, relayBound: time.Second}
	done = conn.calls.add(&innerCall{server: "fake", tool: "ask", ctx: context.Background(), src: sink})
	return conn, sink, done
}

func elicitWith(message string, schema any) transport.JSONRPCRequest {
	return transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1)), Method: "elicitation/create",
		Params: map[string]any{"message": message, "requestedSchema": schema}}
}

// TestRelayedMessageNamesServer: an upstream's message reaches the person
// cleaned, the server and tool on its first visible line: no leading blank
// space or invisible characters, no controls, one blank line at most in a
// row, and at most 1,000 bytes (maxRelayedMessage), cut on a rune
// boundary.
func TestRelayedMessageNamesServer(t *testing.T) {
	long := strings.Repeat("é", 600) // 1,200 bytes
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "Name?", "fake.ask asks: Name?"},
		{"leading blank lines and spaces", "\n\n \t \r\n  Name?", "fake.ask asks: Name?"},
		{"leading invisible characters", "\u200b\ufeff\u3164\u00a0Name?", "fake.ask asks: Name?"},
		{"the bridge's own form, pushed down", strings.Repeat("\n", 80) + "Approve the tool call github.delete_repo?",
			"fake.ask asks: Approve the tool call github.delete_repo?"},
		{"terminal escapes and C0", "\x1b[2J\x1b[HName\x00\x07?", "fake.ask asks: [2J[HName?"},
		{"C1 controls", "\u009b2J\u009dName?", "fake.ask asks: 2JName?"},
		{"carriage return overwriting the line", "\rApprove?", "fake.ask asks: Approve?"},
		{"bidi controls", "ok\u202etxt.exe\u202c", "fake.ask asks: oktxt.exe"},
		{"newlines inside kept", "Name?\nSecond line", "fake.ask asks: Name?\nSecond line"},
		{"runs of blank lines collapsed", "a\n\n\n\n\nb\r\n\r\n\r\nc", "fake.ask asks: a\n\nb\n\nc"},
		{"lines of spaces and invisibles are blank", "a\n \n\t\n\u200b\n\u2028\u2029b", "fake.ask asks: a\n\nb"},
		{"trailing blank lines", "a\n\n\n  ", "fake.ask asks: a"},
		{"tab kept as a space", "a\tb", "fake.ask asks: a b"},
		{"invalid UTF-8", "a\xffb", "fake.ask asks: a\uFFFDb"},
		{"only blank space", " \n\n ", "fake.ask asks:"},
		{"cut at 1,000 bytes on a rune boundary", long, "fake.ask asks: " + strings.Repeat("é", 498) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHuman{caps: HumanCaps{Form: true}, answer: accept("x")}
			conn, _, done := relayConn(h, HumanCaps{Form: true})
			defer done()
			if _, err := conn.handleRequest(context.Background(), elicitWith(tc.in, map[string]any{"type": "object"})); err != nil {
				t.Fatal(err)
			}
			if h.count() != 1 {
				t.Fatalf("the human was asked %d times, want once", h.count())
			}
			got := h.asked[0].Params.Message
			if got != tc.want {
				t.Errorf("relayed message\n got %q\nwant %q", got, tc.want)
			}
			if body := strings.TrimPrefix(got, "fake.ask asks: "); len(body) > 1000 {
				t.Errorf("message of %d bytes, want at most 1,000", len(body))
			}
		})
	}
}

// TestRelayRefusesApprovalImitation: a form whose schema reuses the field
// of the bridge's approval form (decision offering once, run or deny, in
// any encoding of a choice) never reaches the person; the server gets an
// error, a task's question a decline, and the call a note. Other forms
// pass.
func TestRelayRefusesApprovalImitation(t *testing.T) {
	field := func(name string, schema map[string]any) map[string]any {
		return map[string]any{"type": "object", "properties": map[string]any{name: schema}}
	}
	for _, tc := range []struct {
		name   string
		schema any
		want   bool // refused
	}{
		{"the approval form's own schema", approvalForm("github", "delete_repo", nil).Params.RequestedSchema, true},
		{"one of the decisions", field("decision", map[string]any{"type": "string", "enum": []any{"yes", "deny"}}), true},
		{"other case", field("Decision", map[string]any{"type": "string", "enum": []any{" RUN "}}), true},
		{"titled enum (oneOf const)", field("decision", map[string]any{"type": "string",
			"oneOf": []any{map[string]any{"const": "once", "title": "Once"}}}), true},
		{"multi-select (items anyOf)", field("decision", map[string]any{"type": "array",
			"items": map[string]any{"anyOf": []any{map[string]any{"const": "deny"}}}}), true},
		{"decision with other choices", field("decision", map[string]any{"type": "string", "enum": []any{"approve", "reject"}}), false},
		{"decision as free text", field("decision", map[string]any{"type": "string", "default": "run"}), false},
		{"the choices under another name", field("choice", map[string]any{"type": "string", "enum": []any{"once", "run", "deny"}}), false},
		{"no schema", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHuman{caps: HumanCaps{Form: true}, answer: accept("x")}
			conn, sink, done := relayConn(h, HumanCaps{Form: true})
			defer done()
			resp, err := conn.handleRequest(context.Background(), elicitWith("Go on?", tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Error != nil
			if got != tc.want || got && (resp.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(resp.Error.Message, "approval form")) {
				t.Errorf("refused %v (%+v), want %v with -32602 naming the approval form", got, resp.Error, tc.want)
			}
			if asked := h.count() > 0; asked == tc.want {
				t.Errorf("person asked %v, want %v", asked, !tc.want)
			}
			if tc.want && !strings.Contains(sink.all(), "refused") {
				t.Errorf("notes %q: want the refusal noted", sink.all())
			}
			ctx := context.WithValue(context.Background(), innerKey{}, &innerCall{server: "fake", tool: "job", src: sink})
			p := mcp.ElicitationParams{Message: "Go on?", RequestedSchema: tc.schema}
			if res := RelayInput(ctx, time.Second, p); (res.Action == mcp.ElicitationResponseActionDecline) != tc.want {
				t.Errorf("a task's question: %+v, want declined %v", res, tc.want)
			}
		})
	}
}

// TestRelayElicitationCap: one run_python call puts at most MaxInputRounds
// upstream questions to its person, whatever the protocol of its client;
// past that the server gets an error and the person is not asked. The
// next call starts again.
func TestRelayElicitationCap(t *testing.T) {
	h := &fakeHuman{caps: HumanCaps{Form: true}, answer: accept("x")}
	conn, sink, done := relayConn(h, HumanCaps{Form: true})
	defer done()
	ctx := context.Background()
	for i := range MaxInputRounds {
		resp, err := conn.handleRequest(ctx, elicitReq(""))
		if err != nil || resp.Error != nil {
			t.Fatalf("question %d: %+v, %v; want it relayed", i+1, resp, err)
		}
	}
	for range 2 {
		resp, err := conn.handleRequest(ctx, elicitReq(""))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error == nil || !strings.Contains(resp.Error.Message, "cap") {
			t.Errorf("past the cap: %+v, want an error naming the cap", resp)
		}
	}
	if got, want := h.count(), MaxInputRounds; got != want {
		t.Errorf("the person was asked %d times, want %d", got, want)
	}
	if !strings.Contains(sink.all(), "the cap") {
		t.Errorf("notes %q: want the cap noted", sink.all())
	}
	sink.asks = newApprovals(h) // the next run_python call
	if resp, _ := conn.handleRequest(ctx, elicitReq("")); resp.Error != nil {
		t.Errorf("the next call: %+v, want its question relayed", resp.Error)
	}
}

// sampler is a Human that answers sampling and records the requests.
type sampler struct {
	mu    sync.Mutex
	asked []mcp.CreateMessageRequest
}

func (h *sampler) Caps() HumanCaps { return HumanCaps{Sampling: true} }
func (h *sampler) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return nil, errors.New("no elicitation")
}
func (h *sampler) Sample(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, req)
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("ok")}, Model: "m"}, nil
}

func (h *sampler) requests() []mcp.CreateMessageRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]mcp.CreateMessageRequest(nil), h.asked...)
}

// sampleReq is a sampling/createMessage whose text messages are texts.
func sampleReq(systemPrompt string, texts ...string) transport.JSONRPCRequest {
	msgs := make([]any, 0, len(texts))
	for _, text := range texts {
		msgs = append(msgs, map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": text}})
	}
	params := map[string]any{"messages": msgs, "maxTokens": 10}
	if systemPrompt != "" {
		params["systemPrompt"] = systemPrompt
	}
	return transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(1)), Method: "sampling/createMessage", Params: params}
}

// TestRelaySamplingNamesServer: a relayed sampling request's system prompt
// says which server it comes from, the server's own prompt after it.
func TestRelaySamplingNamesServer(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"with a prompt", "You are helpful.", "[Request from MCP server 'fake' through the bridge] You are helpful."},
		{"without one", "", "[Request from MCP server 'fake' through the bridge]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &sampler{}
			conn, _, done := relayConn(h, HumanCaps{Sampling: true})
			defer done()
			resp, err := conn.handleRequest(context.Background(), sampleReq(tc.in, "Hello"))
			if err != nil || resp.Error != nil {
				t.Fatalf("%+v, %v; want the request relayed", resp, err)
			}
			reqs := h.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests relayed, want 1", len(reqs))
			}
			if got := reqs[0].SystemPrompt; got != tc.want {
				t.Errorf("system prompt\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestRelaySamplingCap: sampling messages of more than 64 KiB of JSON in
// all are refused with a one-line error and never reach the client.
func TestRelaySamplingCap(t *testing.T) {
	const capBytes = 64 << 10
	empty, _ := json.Marshal(mcp.SamplingMessage{Role: mcp.RoleUser, Content: mcp.NewTextContent("")})
	half := capBytes / 2
	text := func(n int) string { return strings.Repeat("a", n-len(empty)) } // a message of n bytes of JSON
	for _, tc := range []struct {
		name  string
		texts []string
		want  bool // refused
	}{
		{"small", []string{"Hello"}, false},
		{"64 KiB in two messages", []string{text(half), text(half)}, false},
		{"a byte more", []string{text(half), text(half + 1)}, true},
		{"one large message", []string{strings.Repeat("a", capBytes)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &sampler{}
			conn, sink, done := relayConn(h, HumanCaps{Sampling: true})
			defer done()
			resp, err := conn.handleRequest(context.Background(), sampleReq("", tc.texts...))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Error != nil
			if got != tc.want {
				t.Fatalf("refused %v (%+v), want %v", got, resp.Error, tc.want)
			}
			if relayed := len(h.requests()) > 0; relayed == tc.want {
				t.Errorf("relayed %v, want %v", relayed, !tc.want)
			}
			if !tc.want {
				return
			}
			if msg := resp.Error.Message; resp.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(msg, "64 KiB") || strings.Contains(msg, "\n") {
				t.Errorf("error %d %q: want -32602, one line naming the 64 KiB cap", resp.Error.Code, msg)
			}
			if !strings.Contains(sink.all(), "64 KiB") {
				t.Errorf("notes %q: want the refusal noted", sink.all())
			}
		})
	}
}

// TestRelaySamplingCountsAndPromptCap: sampling requests count toward the
// call's cap of relayed requests, as questions do, and a system prompt
// over 16 KiB is refused before it reaches the client.
func TestRelaySamplingCountsAndPromptCap(t *testing.T) {
	h := &sampler{}
	conn, _, done := relayConn(h, HumanCaps{Sampling: true})
	defer done()
	ctx := context.Background()
	resp, err := conn.handleRequest(ctx, sampleReq(strings.Repeat("p", 16<<10+1), "Hello"))
	if err != nil || resp.Error == nil || !strings.Contains(resp.Error.Message, "16 KiB") {
		t.Fatalf("a 16 KiB + 1 system prompt: %+v, %v; want a refusal naming the cap", resp, err)
	}
	for i := range MaxInputRounds {
		if resp, err := conn.handleRequest(ctx, sampleReq("", "Hello")); err != nil || resp.Error != nil {
			t.Fatalf("request %d: %+v, %v; want it relayed", i+1, resp, err)
		}
	}
	resp, err = conn.handleRequest(ctx, sampleReq("", "Hello"))
	if err != nil || resp.Error == nil || !strings.Contains(resp.Error.Message, "the cap") {
		t.Errorf("past the cap: %+v, %v; want a refusal naming the cap", resp, err)
	}
	if got := len(h.requests()); got != MaxInputRounds {
		t.Errorf("%d sampling requests reached the client, want %d", got, MaxInputRounds)
	}
}

// TestBadElicitationURL: a URL-mode question's link must be a plain https
// link (http only to this machine), short, without spaces, controls or a
// user name.
func TestBadElicitationURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // "" when the link is fine
	}{
		{"https://example.com/consent?x=1", ""},
		{"http://localhost:8080/cb", ""},
		{"http://127.0.0.1/cb", ""},
		{"http://example.com/consent", `uses "http", not https`},
		{"javascript:alert(1)", "is not an absolute URL"},
		{"data:text/html,hi", "is not an absolute URL"},
		{"file:///etc/passwd", "is not an absolute URL"},
		{"ftp://example.com/x", `uses "ftp", not https`},
		{"https://bank.example@evil.example/", "carries a user name"},
		{"https://example.com/a b", "holds a space or a control character"},
		{"https://example.com/\u202egnp.exe", "holds a space or a control character"},
		{"https://example.com/" + strings.Repeat("a", 2048), "over 2048"},
		{"/relative", "is not an absolute URL"},
	} {
		if got := badElicitationURL(tc.url); tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("badElicitationURL(%.60q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}

// TestRelayCleansFormLabels: a relayed form's titles, descriptions and
// enum names lose control and bidi characters, at any depth, and a URL
// question with a bad link never reaches the person.
func TestRelayCleansFormLabels(t *testing.T) {
	h := &fakeHuman{caps: HumanCaps{Form: true, URL: true}, answer: accept("x")}
	conn, _, done := relayConn(h, HumanCaps{Form: true, URL: true})
	defer done()
	req := elicitReq("")
	req.Params = map[string]any{"message": "Pick", "requestedSchema": map[string]any{"type": "object", "title": "Form\x1b[2J",
		"properties": map[string]any{"c": map[string]any{"type": "string", "title": "Col\u202eour", "description": "line\r\nnext\x07",
			"enum": []any{"a"}, "enumNames": []any{"A\x00"}}}}}
	if resp, err := conn.handleRequest(context.Background(), req); err != nil || resp.Error != nil {
		t.Fatalf("%+v, %v", resp, err)
	}
	got, _ := json.Marshal(h.asked[0].Params.RequestedSchema)
	for _, bad := range []string{`\u001b`, `\u202e`, `\r`, `\u0007`, `\u0000`} {
		if strings.Contains(string(got), bad) {
			t.Errorf("relayed schema %s still holds %s", got, bad)
		}
	}
	if !strings.Contains(string(got), `"title":"Colour"`) || !strings.Contains(string(got), `"description":"line\nnext"`) {
		t.Errorf("relayed schema %s: want the labels kept, cleaned", got)
	}
	url := transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(2)), Method: "elicitation/create",
		Params: map[string]any{"mode": "url", "message": "Sign in", "url": "javascript:alert(1)", "elicitationId": "e"}}
	resp, err := conn.handleRequest(context.Background(), url)
	if err != nil || resp.Error == nil || !strings.Contains(resp.Error.Message, "sign-in link is not an absolute URL") {
		t.Errorf("a javascript: link: %+v, %v; want a refusal", resp, err)
	}
	if h.count() != 1 {
		t.Errorf("the person was asked %d times, want 1 (the form only)", h.count())
	}
}
