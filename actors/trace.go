package actors

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// Traces: the spans of a run_python call and what it did, named and
// attributed after the OpenTelemetry semantic conventions for MCP and
// GenAI (development status, so their keys are spelled out here: the Go
// semconv packages do not carry them yet).
//
//	tools/call run_python      SERVER  (front.go: one per call)
//	├── sandbox start          INTERNAL (call.go: when the call starts one)
//	├── execute_tool T         INTERNAL (router.go: each box→host request)
//	│   ├── approval S.T       INTERNAL (approve.go: a human's answer awaited)
//	│   └── tools/call T       CLIENT  (serverconn.go: the upstream request)
//	└── …
//
// The spans come from the global TracerProvider, which the engine sets
// when OTEL_* asks for traces; until then, and when tracing is off, they
// are no-ops that still carry a client's remote parent, so its traceparent
// goes on to the upstream servers either way.
var tracer = otel.Tracer("github.com/bridge-mcp/bridge")

// traceContext is the W3C trace context (traceparent and tracestate), the
// one propagation format the MCP spec names for _meta (SEP-414). Baggage is
// not forwarded: upstreams are third parties, and a client's baggage may
// carry its own data.
var traceContext propagation.TraceContext

// Attribute keys of the MCP and GenAI semantic conventions, and the
// bridge's own under bridge.*.
const (
	attrMCPMethod     = attribute.Key("mcp.method.name")
	attrMCPSession    = attribute.Key("mcp.session.id")
	attrMCPProtocol   = attribute.Key("mcp.protocol.version")
	attrRequestID     = attribute.Key("jsonrpc.request.id")
	attrGenAIOp       = attribute.Key("gen_ai.operation.name")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolArgs      = attribute.Key("gen_ai.tool.call.arguments")
	attrToolResult    = attribute.Key("gen_ai.tool.call.result")
	attrNetTransport  = attribute.Key("network.transport")
	attrServerAddress = attribute.Key("server.address")
	attrErrorType     = attribute.Key("error.type")
	attrServer        = attribute.Key("bridge.server")
	attrSession       = attribute.Key("bridge.session")
	attrPrincipal     = attribute.Key("bridge.principal")
	attrCall          = attribute.Key("bridge.call")
	attrStatus        = attribute.Key("bridge.status")
	attrMethod        = attribute.Key("bridge.method")
	attrDecision      = attribute.Key("bridge.approval.decision")
	attrSpare         = attribute.Key("bridge.sandbox.spare")
	attrReplaced      = attribute.Key("bridge.sandbox.replaced")
)

// maxSpanName bounds a server or tool name the sandbox sent, in a span's
// name and attributes.
const maxSpanName = 128

// traceValues, when set, is how a value (code, arguments, a result) goes
// into a span attribute: redacted and clipped by the engine. nil, the
// default, keeps values out of spans (MCP_BRIDGE_TRACE_VALUES).
var traceValues atomic.Pointer[func(string) string]

// SetTraceValues puts code and argument values into spans through f (which
// must redact secrets and bound the size), or keeps them out when f is nil.
// The engine sets it once at start.
func SetTraceValues(f func(string) string) {
	if f == nil {
		traceValues.Store(nil)
		return
	}
	traceValues.Store(&f)
}

// traceValue sets key to v on span when values are traced.
func traceValue(span trace.Span, key attribute.Key, v string) {
	if f := traceValues.Load(); f != nil && span.IsRecording() {
		span.SetAttributes(key.String((*f)(v)))
	}
}

// traceParent is ctx with meta's traceparent and tracestate as the remote
// parent, when meta carries a valid one; else ctx, whose parent (from the
// HTTP headers under bridge serve) stands.
func traceParent(ctx context.Context, meta *mcp.Meta) context.Context {
	if meta == nil || meta.AdditionalFields == nil {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	for _, k := range traceContext.Fields() {
		if s, ok := meta.AdditionalFields[k].(string); ok {
			carrier[k] = s
		}
	}
	if carrier["traceparent"] == "" {
		return ctx
	}
	return traceContext.Extract(ctx, carrier)
}

// TraceHeaders is the trace context of ctx as HTTP headers (and _meta
// keys), for an upstream's requests; nil when ctx has none.
func TraceHeaders(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier
}

// endSpan ends span with err as its error, if any: error.type names its
// kind, and its message, which may quote arguments, is the status
// description only when values are traced.
func endSpan(span trace.Span, err error, errType string) {
	if err != nil && span.IsRecording() {
		desc := errType
		if f := traceValues.Load(); f != nil {
			desc = (*f)(err.Error())
		}
		span.SetStatus(codes.Error, desc)
		span.SetAttributes(attrErrorType.String(errType))
	}
	span.End()
}

// RunSpan begins the SERVER span of one run_python call, under the
// client's trace context: its request's _meta, else what ctx carries (the
// HTTP headers, under bridge serve). bridge exec's call has neither: its
// span is a root.
func RunSpan(ctx context.Context, tool string, meta *mcp.Meta) (context.Context, trace.Span) {
	ctx = traceParent(ctx, meta)
	attrs := []attribute.KeyValue{attrMCPMethod.String(string(mcp.MethodToolsCall)), attrToolName.String(tool),
		attrGenAIOp.String("execute_tool")}
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		attrs = append(attrs, attrMCPSession.String(cs.SessionID()))
	}
	return tracer.Start(ctx, string(mcp.MethodToolsCall)+" "+tool, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// EndRunSpan records a call's outcome on its span and ends it: the
// session, the principal and the status, which is the span's error when
// not success; raw, its arguments, only when values are traced.
func EndRunSpan(ctx context.Context, span trace.Span, raw json.RawMessage, r result.Result) {
	if span.IsRecording() {
		traceValue(span, attrToolArgs, string(raw))
		span.SetAttributes(attrSession.String(r.Session), attrStatus.String(r.Status))
		if p := PrincipalFrom(ctx); p != "" {
			span.SetAttributes(attrPrincipal.String(p))
		}
		if r.Status != result.StatusSuccess {
			span.SetStatus(codes.Error, r.Status)
			span.SetAttributes(attrErrorType.String(r.Status))
		}
	}
	span.End()
}

// tracedRun is run inside a span of its own (RunSpan, EndRunSpan).
func tracedRun(tool string, meta *mcp.Meta, run func(context.Context, json.RawMessage) result.Result) func(context.Context, json.RawMessage) result.Result {
	return func(ctx context.Context, raw json.RawMessage) result.Result {
		ctx, span := RunSpan(ctx, tool, meta)
		r := run(ctx, raw)
		EndRunSpan(ctx, span, raw, r)
		return r
	}
}

// innerSpan begins the span of one box→host request of a call, under
// parent, the call's span: for a tool call, "execute_tool {tool}" after
// the GenAI conventions, with the server and tool; for the others, the
// link method's name. parent is not recording when the call is not traced:
// then the request goes on under it as it is, so a client's remote parent
// still reaches the upstreams, and nothing is parsed. It is nil when the
// request came outside a call.
func innerSpan(ctx context.Context, parent trace.Span, method string, params json.RawMessage) (context.Context, trace.Span) {
	if parent == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx = trace.ContextWithSpan(ctx, parent)
	if !parent.IsRecording() {
		return ctx, parent // endInner leaves a span it did not begin alone
	}
	if method != protocol.MethodCallTool {
		return tracer.Start(ctx, method, trace.WithAttributes(attrMethod.String(method)))
	}
	var p struct {
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	// The sandbox names them: bounded, as any text of the code's is.
	p.Server, p.Tool = clip(p.Server, maxSpanName), clip(p.Tool, maxSpanName)
	ctx, span := tracer.Start(ctx, "execute_tool "+p.Tool, trace.WithAttributes(attrMethod.String(method),
		attrGenAIOp.String("execute_tool"), attrToolName.String(p.Tool), attrServer.String(p.Server)))
	traceValue(span, attrToolArgs, string(p.Arguments))
	return ctx, span
}

// endInner ends an inner request's span with its result (when values are
// traced) or its error.
func endInner(span trace.Span, res any, err error) {
	if !span.IsRecording() {
		return
	}
	if err == nil && traceValues.Load() != nil {
		if b, merr := json.Marshal(res); merr == nil {
			traceValue(span, attrToolResult, string(b))
		}
	}
	// error.type: the link error's kind (denied, timeout, server_error, …)
	kind := "error"
	if _, k, ok := LinkErrorOf(err); ok && k != "" {
		kind = k
	}
	endSpan(span, err, kind)
}
