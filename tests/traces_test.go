package tests

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: the spans the bridge
// exports, decoded with the OTLP protobuf definitions.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   map[string]bool // service.name of each export's resource
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{svc: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) export(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var msg coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				r.svc[a.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// all is a copy of the spans received so far.
func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// await waits up to 15 s for a span that ok accepts.
func (r *otlpReceiver) await(t *testing.T, what string, ok func(*tracepb.Span) bool) *tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, s := range r.all() {
			if ok(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %s among %d received:\n%s", what, len(r.all()), spanList(r.all()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func spanList(spans []*tracepb.Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s trace=%x span=%x parent=%x %v\n", s.Kind, s.Name, s.TraceId, s.SpanId, s.ParentSpanId, attrMap(s))
	}
	return b.String()
}

// attrMap is a span's attributes as text.
func attrMap(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, a := range s.Attributes {
		m[a.Key] = anyValue(a.Value)
	}
	return m
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return v.String()
}

// traceparent is a W3C traceparent with fresh ids.
func traceparent(trace, span byte) (header string, traceID, spanID []byte) {
	traceID, spanID = bytes.Repeat([]byte{trace}, 16), bytes.Repeat([]byte{span}, 8)
	return fmt.Sprintf("00-%x-%x-01", traceID, spanID), traceID, spanID
}

var upstreamTrace = regexp.MustCompile(`meta=(\S*) header=(\S*)`)

// TestTraces: under bridge serve with an OTLP receiver, one trace runs from
// the client's traceparent (its request's _meta, else its HTTP header)
// through the run_python span, the sandbox's start, each inner call's span
// and an approval's wait, to the _meta (and, over HTTP, the header) that
// each upstream server receives; no code or argument value is in a span.
func TestTraces(t *testing.T) {
	requirePodman(t)
	rcv := newOTLPReceiver(t)
	env := withServers(t, map[string]any{
		"fake": fake("--trace-tool"),
		"web":  map[string]any{"type": "streamable-http", "url": startFakeHTTP(t, "--trace-tool")},
	}, nil)
	writeJSON(t, filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy"), map[string]any{
		"servers": map[string]any{"fake": map[string]any{"approve": []string{"trace"}}},
	})
	env["MCP_BRIDGE_TOKENS_FILE"] = writeTokens(t, "alice "+aliceToken)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.srv.URL
	env["OTEL_BSP_SCHEDULE_DELAY"] = "100"
	s := startServe(t, env)

	headerTP, headerTrace, headerSpan := traceparent(0xb1, 0xb2)
	tr, err := transport.NewStreamableHTTP(s.base+"/mcp", transport.WithHTTPHeaders(map[string]string{
		"Authorization": "Bearer " + aliceToken, "traceparent": headerTP}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithElicitationHandler(newHuman(t, decide("once", 0))))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	initReq := mcp.InitializeRequest{}
	initReq.Params.ProtocolVersion = "2025-11-25"
	initReq.Params.ClientInfo = mcp.Implementation{Name: "bridge-e2e-traces", Version: "1"}
	if _, err := c.Initialize(ctx, initReq); err != nil {
		t.Fatal(err)
	}
	const code = "# code-marker-5521\n" +
		"print(await mcp_fake.trace())\nprint(await mcp_web.trace())\nprint(await mcp_web.echo(text='arg-marker-8830'))"
	call := func(meta *mcp.Meta) string {
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_python"
		req.Params.Arguments = map[string]any{"code": code, "servers": []string{"fake", "web"}}
		req.Params.Meta = meta
		res, err := c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("tools/call: %v\n%s", err, tail(s.stderr.String(), 4000))
		}
		return text(t, res)
	}

	// The first call's _meta names its parent, which wins over the header.
	metaTP, metaTrace, metaSpan := traceparent(0xa1, 0xa2)
	got := call(&mcp.Meta{AdditionalFields: map[string]any{"traceparent": metaTP, "tracestate": "vendor=1"}})
	seen := upstreamTrace.FindAllStringSubmatch(got, -1)
	if len(seen) != 2 || !strings.Contains(got, "arg-marker-8830") {
		t.Fatalf("first call: %s", got)
	}
	run := rcv.await(t, "tools/call run_python under the _meta parent", func(sp *tracepb.Span) bool {
		return sp.Name == "tools/call run_python" && bytes.Equal(sp.TraceId, metaTrace) && bytes.Equal(sp.ParentSpanId, metaSpan)
	})
	if run.Kind != tracepb.Span_SPAN_KIND_SERVER || attrMap(run)["bridge.principal"] != "alice" || attrMap(run)["bridge.status"] != "success" {
		t.Errorf("run span: %s", spanList([]*tracepb.Span{run}))
	}
	child := func(parent *tracepb.Span, name string) *tracepb.Span {
		return rcv.await(t, name+" under "+parent.Name, func(sp *tracepb.Span) bool {
			return sp.Name == name && bytes.Equal(sp.TraceId, metaTrace) && bytes.Equal(sp.ParentSpanId, parent.SpanId)
		})
	}
	child(run, "sandbox start")
	inner := child(run, "execute_tool trace")
	approval := child(inner, "approval fake.trace")
	if d := attrMap(approval)["bridge.approval.decision"]; d != "once" {
		t.Errorf("approval span decision %q, want once", d)
	}
	// Each upstream got the context of its CLIENT span: same trace, that
	// span as the parent.
	for i, server := range []string{"fake", "web"} {
		up := rcv.await(t, "tools/call trace of "+server, func(sp *tracepb.Span) bool {
			return sp.Name == "tools/call trace" && sp.Kind == tracepb.Span_SPAN_KIND_CLIENT && attrMap(sp)["bridge.server"] == server &&
				bytes.Equal(sp.TraceId, metaTrace)
		})
		want := fmt.Sprintf("00-%x-%x-01", metaTrace, up.SpanId)
		if seen[i][1] != want {
			t.Errorf("%s received _meta traceparent %q, want %q", server, seen[i][1], want)
		}
		if server == "web" && seen[i][2] != want {
			t.Errorf("web received header traceparent %q, want %q", seen[i][2], want)
		}
		var parent *tracepb.Span
		for _, sp := range rcv.all() {
			if bytes.Equal(sp.SpanId, up.ParentSpanId) {
				parent = sp
			}
		}
		if parent == nil || parent.Name != "execute_tool trace" || !bytes.Equal(parent.ParentSpanId, run.SpanId) {
			t.Errorf("%s's upstream span is not under an inner call of the run:\n%s", server, spanList(rcv.all()))
		}
	}

	// The second call has no _meta: its HTTP header is the parent.
	call(nil)
	rcv.await(t, "tools/call run_python under the header parent", func(sp *tracepb.Span) bool {
		return sp.Name == "tools/call run_python" && bytes.Equal(sp.TraceId, headerTrace) && bytes.Equal(sp.ParentSpanId, headerSpan)
	})

	all := rcv.all()
	for _, sp := range all {
		for _, a := range sp.Attributes {
			if v := anyValue(a.Value); strings.Contains(v, "marker") {
				t.Errorf("span %s attribute %s holds a value: %q", sp.Name, a.Key, v)
			}
		}
		if strings.Contains(sp.Status.GetMessage(), "marker") {
			t.Errorf("span %s status holds a value", sp.Name)
		}
	}
	rcv.mu.Lock()
	if !rcv.svc["bridge"] {
		t.Errorf("service.name of the exports: %v, want bridge", rcv.svc)
	}
	rcv.mu.Unlock()
	if strings.Contains(s.stderr.String(), "traces: export failed") {
		t.Errorf("an export to a live receiver failed:\n%s", tail(s.stderr.String(), 2000))
	}
	t.Logf("%d spans in %s", len(all), hex.EncodeToString(metaTrace))
}

// TestTracesDeadCollector: a collector on a closed port, and one that
// accepts and never answers, cost bridge exec at most the 2 s flush bound
// over the same call without traces, and the call's output is whole.
func TestTracesDeadCollector(t *testing.T) {
	requirePodman(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	t.Cleanup(held.Wait)
	go func() { // accept and hold every connection, never answering
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			held.Add(1)
			go func() { defer held.Done(); _, _ = io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	t.Cleanup(func() { silent.Close() })

	exec1 := func(endpoint string) time.Duration {
		env := withServers(t, map[string]any{}, nil)
		if endpoint != "" {
			env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
		}
		start := time.Now()
		out, errOut, code := runCLI(t, env, "", "exec", "print('done', 6*7)")
		took := time.Since(start)
		if code != 0 || !strings.Contains(out, "done 42") {
			t.Fatalf("exec with endpoint %q: exit %d: %s%s", endpoint, code, out, errOut)
		}
		return took
	}
	base := exec1("")
	for _, ep := range []string{"http://" + closedAddr, "http://" + silent.Addr().String()} {
		took := exec1(ep)
		if took > base+2*time.Second+time.Second {
			t.Errorf("exec with the collector at %s took %s, against %s without traces: over the 2 s flush bound", ep, took, base)
		}
		t.Logf("exec: %s without traces, %s with the collector at %s", base, took, ep)
	}
}

// TestTraceContextWithoutExport: with traces off, a client's traceparent
// still goes on, unchanged, to the upstream servers.
func TestTraceContextWithoutExport(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{"fake": fake("--trace-tool")}, nil))
	tp, _, _ := traceparent(0xc1, 0xc2)
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": "print(await mcp_fake.trace())", "servers": []string{"fake"}}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": tp}}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := b.c.CallTool(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(text(t, res)), "meta="+tp+" header="; got != want {
		t.Errorf("upstream received %q, want %q", got, want)
	}
}

// grpcReceiver is an OTLP/gRPC trace receiver.
type grpcReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (g *grpcReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			g.spans = append(g.spans, ss.Spans...)
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestTracesGRPC: with OTEL_EXPORTER_OTLP_PROTOCOL=grpc, bridge exec's
// spans reach an OTLP/gRPC receiver before it exits.
func TestTracesGRPC(t *testing.T) {
	requirePodman(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rcv := &grpcReceiver{}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, rcv)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	env := withServers(t, map[string]any{}, nil)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://" + ln.Addr().String()
	env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	if out, errOut, code := runCLI(t, env, "", "exec", "print(7)"); code != 0 || out != "7\n" {
		t.Fatalf("exec: exit %d: %q %s", code, out, errOut)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	names := map[string]bool{}
	for _, sp := range rcv.spans {
		names[sp.Name] = true
	}
	if !names["tools/call run_python"] || !names["sandbox start"] {
		t.Errorf("spans over gRPC: %s", spanList(rcv.spans))
	}
}
