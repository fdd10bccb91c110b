package actors

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/bridge-mcp/bridge/protocol/result"
)

var (
	spansOnce sync.Once
	spans     *tracetest.SpanRecorder
)

// recordSpans makes the package's tracer record into one in-memory
// recorder: the global provider delegates once per process.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	spansOnce.Do(func() {
		spans = tracetest.NewSpanRecorder()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	})
	return spans
}

const clientParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestTraceParent: a request's _meta traceparent becomes the remote
// parent; a missing or malformed one leaves ctx as it was.
func TestTraceParent(t *testing.T) {
	cases := []struct {
		name string
		meta *mcp.Meta
		want string // the parent's trace id, "" for none
	}{
		{"none", nil, ""},
		{"no trace keys", &mcp.Meta{AdditionalFields: map[string]any{"other": "x"}}, ""},
		{"valid", &mcp.Meta{AdditionalFields: map[string]any{"traceparent": clientParent, "tracestate": "v=1"}}, "0af7651916cd43dd8448eb211c80319c"},
		{"malformed", &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-zz-yy-01"}}, ""},
		{"not a string", &mcp.Meta{AdditionalFields: map[string]any{"traceparent": 7}}, ""},
	}
	for _, c := range cases {
		sc := trace.SpanContextFromContext(traceParent(context.Background(), c.meta))
		got := ""
		if sc.IsValid() {
			got = sc.TraceID().String()
		}
		if got != c.want {
			t.Errorf("%s: parent trace %q, want %q", c.name, got, c.want)
		}
	}
}

// TestOutgoingTraceMeta: a legacy server's request gets the trace context
// of ctx in its _meta beside the caller's keys; without one it is
// untouched.
func TestOutgoingTraceMeta(t *testing.T) {
	conn := &serverConn{name: "legacy"}
	req := transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId("1"), Method: "tools/call",
		Params: map[string]any{"name": "t", "_meta": map[string]any{"progressToken": "7"}}}
	if got := conn.outgoing(context.Background(), req); got.Header != nil || len(got.Params.(map[string]any)) != 2 {
		t.Fatalf("an untraced request was changed: %v", got.Params)
	}
	ctx := traceParent(context.Background(), &mcp.Meta{AdditionalFields: map[string]any{"traceparent": clientParent}})
	got := conn.outgoing(ctx, req)
	var p struct {
		Meta map[string]string `json:"_meta"`
	}
	raw, _ := json.Marshal(got.Params)
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.Meta["traceparent"] != clientParent || p.Meta["progressToken"] != "7" {
		t.Errorf("_meta = %v, want the client's traceparent and progressToken 7", p.Meta)
	}
}

// TestTraceValues: code and arguments reach span attributes only with
// SetTraceValues, through its function; error messages likewise.
func TestTraceValues(t *testing.T) {
	rec := recordSpans(t)
	t.Cleanup(func() { SetTraceValues(nil) })
	run := func(name string) map[string]string {
		_, span := tracer.Start(context.Background(), name)
		_, inner := innerSpan(context.Background(), span, "call_tool", json.RawMessage(`{"server":"a","tool":"b","arguments":{"q":"arg-456"}}`))
		endInner(inner, nil, &rpcError{method: "tools/call", msg: "bad arg-456", code: -32602})
		EndRunSpan(context.Background(), span, json.RawMessage(`{"code":"print('v-123')"}`), result.Result{Status: result.StatusError, Session: "s"})
		attrs := map[string]string{}
		for _, s := range rec.Ended() {
			if s.Name() == name || (s.Parent().SpanID() == span.SpanContext().SpanID() && s.Parent().IsValid()) {
				for _, a := range s.Attributes() {
					attrs[s.Name()+" "+string(a.Key)] = a.Value.Emit()
				}
				attrs[s.Name()+" status"] = s.Status().Description
			}
		}
		return attrs
	}
	off := run("off")
	for k, v := range off {
		if strings.Contains(v, "v-123") || strings.Contains(v, "arg-456") {
			t.Errorf("without values, %s = %q", k, v)
		}
	}
	if off["off bridge.status"] != "error" || off["off error.type"] != "error" {
		t.Errorf("outcome attributes: %v", off)
	}
	SetTraceValues(func(s string) string { return "<" + s + ">" })
	on := run("on")
	if got, want := on["on gen_ai.tool.call.arguments"], `<{"code":"print('v-123')"}>`; got != want {
		t.Errorf("run arguments = %q, want %q", got, want)
	}
	if got, want := on["execute_tool b gen_ai.tool.call.arguments"], `<{"q":"arg-456"}>`; got != want {
		t.Errorf("inner arguments = %q, want %q (%v)", got, want, on)
	}
	if got := on["execute_tool b status"]; !strings.Contains(got, "arg-456") || !strings.HasPrefix(got, "<") {
		t.Errorf("inner status = %q, want the error through the function", got)
	}
}
