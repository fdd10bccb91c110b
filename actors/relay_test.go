package actors

import (
	"context"
	"encoding/json"
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
