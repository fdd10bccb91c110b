package actors

// serverconn.go is one running MCP server as a client actor holds it: how it
// starts (a stdio child or an HTTP/SSE session), how requests reach it, and
// how it stops. client.go is the actor that manages its lifecycle.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/bridge-mcp/bridge/actors/childproc"
	"github.com/bridge-mcp/bridge/actors/mcpwire"
	"github.com/bridge-mcp/bridge/protocol/printable"
)

// waitClosed waits up to d for ch to close.
var waitClosed = childproc.WaitClosed

// serverConn is one running server: its process (stdio) or HTTP session,
// and the mcp-go client speaking to it.
type serverConn struct {
	name    string
	mc      *client.Client
	tr      transport.Interface
	child   *childproc.Child      // nil for http/sse
	proc    *childproc.Process    // child.Proc
	stderr  *childproc.TailBuffer // child.Stderr
	host    string                // an http/sse server's host, for spans
	version string
	started time.Time
	// modern is the 2026-07-28 revision the server is spoken to in (a
	// string; empty or unset: legacy), set once its discover succeeds
	// (era.go). probed says this start found the era by probing, and
	// probedAt is when it was last found so.
	modern        atomic.Value
	legacyVersion string // the revision a legacy server's initialize agreed
	listChanged   bool   // a modern server announces tool list changes (listen)
	probed        bool
	probedAt      time.Time
	// schemas are the tools' input schemas, for the Mcp-Param-* headers
	// of a modern HTTP server's tools/call.
	schemas toolSchemas
	ids     atomic.Int64
	// inflight counts calls in progress: written by callers (Client.Call),
	// read by Serve's idle check. served is set by the first successful
	// call and read by Serve when the server exits.
	inflight atomic.Int64
	served   atomic.Bool
	children ChildRegistry
	progress progressRoutes // the progress tokens of calls in flight (upstream.go)
	calls    inflightCalls  // the calls in flight, for the questions relayed (relay.go)
	// declared is the capability set initialize declared; relayBound
	// bounds a relayed question; life ends with close, and the relays.
	declared   HumanCaps
	relayBound time.Duration
	life       context.Context
	endLife    context.CancelFunc
	// toolTasks says the server accepts task-augmented tools/call; set
	// before the connection is handed out. tasks are its tasks in flight
	// (tasks.go).
	toolTasks bool
	tasks     taskCalls
	// log is the client's; panicAt its test hook (ClientDeps.panicAt).
	log     zerolog.Logger
	panicAt panicHook
	// aborted says a panic in one of the connection's goroutines ended it
	// (abort); exitDesc then says so, whatever the process did after.
	aborted atomic.Bool

	done      chan struct{} // closed when the process exits or the connection is lost
	doneOnce  sync.Once
	closing   chan struct{} // closed by close
	closeOnce sync.Once
	lost      atomic.Value       // string: why an http/sse connection ended
	cancel    context.CancelFunc // ends an http/sse stream; nil for stdio
	wg        sync.WaitGroup
}

func (s *serverConn) markDone(why string) {
	s.doneOnce.Do(func() {
		if why != "" {
			s.lost.Store(why)
		}
		close(s.done)
	})
}

// abort ends the connection after a panic in one of its goroutines
// (guard.go): done closes, so the client's watch reports it exited, and the
// client closes it and starts the server again after its backoff (PXY-3).
// It does not close the connection: the client's Serve owns that, and the
// watch of a closed connection reports nothing.
func (s *serverConn) abort() {
	s.aborted.Store(true)
	s.markDone(abortedDesc)
}

// abortedDesc is the exit description of an aborted connection.
const abortedDesc = "ended by an internal error (see the bridge's log)"

func (s *serverConn) exitDesc() string {
	if s.aborted.Load() {
		return abortedDesc
	}
	if s.proc != nil {
		select {
		case <-s.proc.Exited():
			if code := s.proc.Code(); code > 128 {
				return fmt.Sprintf("killed by signal %d", code-128)
			}
			return fmt.Sprintf("exit status %d", s.proc.Code())
		default:
		}
	}
	if why, ok := s.lost.Load().(string); ok {
		return why
	}
	if s.proc != nil {
		return "still running"
	}
	return "connection lost"
}

func (s *serverConn) stderrTail() string {
	if s.stderr == nil {
		return "(none)"
	}
	// VAL-3: at most 10 lines and 1 KiB.
	lines := strings.Split(s.stderr.String(), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	out := strings.Join(lines, "\n")
	if len(out) > 1024 {
		out = out[len(out)-1024:]
	}
	if strings.TrimSpace(out) == "" {
		return "(none)"
	}
	return out
}

// request sends a raw JSON-RPC request through the transport and returns
// the raw result, so schemas keep their key order and arguments their
// precision.
func (s *serverConn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return s.requestID(ctx, s.nextID(), method, params)
}

// nextID is a request id unique on this connection.
func (s *serverConn) nextID() mcp.RequestId {
	return mcp.NewRequestId(fmt.Sprintf("bridge-%d", s.ids.Add(1)))
}

// requestID is request with the id chosen by the caller.
// Each request is a CLIENT span (trace.go) whose context goes to the server
// in _meta and, over HTTP, in the traceparent header.
func (s *serverConn) requestID(ctx context.Context, id mcp.RequestId, method string, params any) (_ json.RawMessage, err error) {
	ctx, span := s.requestSpan(ctx, id, method, params)
	defer func() { endSpan(span, err, requestErrorType(err)) }()
	req := s.outgoing(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params})
	resp, err := s.tr.SendRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		if bad := mcpwire.AsBadReply(resp.Error); bad != nil {
			return nil, bad
		}
		e := &rpcError{method: method, msg: resp.Error.Message, code: resp.Error.Code}
		if resp.Error.Data != nil {
			e.data, _ = json.Marshal(resp.Error.Data)
		}
		return nil, e
	}
	return resp.Result, nil
}

// requestSpan begins the CLIENT span of a request to the server, named
// "{method} {tool}" for a tool call and "{method}" otherwise.
func (s *serverConn) requestSpan(ctx context.Context, id mcp.RequestId, method string, params any) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		// No call's span to hang it under (a listen stream, a start's
		// tools/list, or tracing is off): the context goes on as it is.
		return ctx, trace.SpanFromContext(ctx)
	}
	name := method
	attrs := []attribute.KeyValue{attrMCPMethod.String(method), attrRequestID.String(fmt.Sprint(id.Value())), attrServer.String(s.name)}
	if method == string(mcp.MethodToolsCall) {
		if p, ok := params.(map[string]any); ok {
			if tool, ok := p["name"].(string); ok {
				name += " " + tool
				attrs = append(attrs, attrToolName.String(tool), attrGenAIOp.String("execute_tool"))
			}
		}
	}
	if v := s.protocol(); v != "" {
		attrs = append(attrs, attrMCPProtocol.String(v))
	}
	if s.child != nil {
		attrs = append(attrs, attrNetTransport.String("pipe"))
	} else {
		attrs = append(attrs, attrNetTransport.String("tcp"))
		if s.host != "" {
			attrs = append(attrs, attrServerAddress.String(s.host))
		}
	}
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// requestErrorType is a request error's error.type: the JSON-RPC error
// code of a server's error reply, else the transport's failure.
func requestErrorType(err error) string {
	var e *rpcError
	if errors.As(err, &e) {
		return fmt.Sprint(e.code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "transport"
}

// rpcError is a JSON-RPC error reply from a server (as opposed to a
// transport failure); data is its data member, nil when none.
type rpcError struct {
	method string
	msg    string
	code   int
	data   json.RawMessage
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s: %s (code %d)", e.method, e.msg, e.code) }

// answered says whether err is the server's answer to a request (an error
// reply, or a reply the transport could not use) rather than the
// transport's failure: an answered request needs no cancel, and its error
// no wait for the server's exit.
func answered(err error) bool {
	var rpcErr *rpcError
	var bad *mcpwire.BadReplyError
	return errors.As(err, &rpcErr) || errors.As(err, &bad)
}

// listTools fetches every page of tools/list, each entry parsed
// (ParseTools): the entries the bridge cannot use stay in, marked, so that
// the disk catalog keeps them and doctor and describe_server can name them.
func (s *serverConn) listTools(ctx context.Context) ([]ToolInfo, error) {
	var raws []json.RawMessage
	cursor := ""
	for page := 0; page < 1000; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := s.request(ctx, "tools/list", params)
		if err != nil {
			return nil, err
		}
		tools, next, err := toolsPage(raw)
		if err != nil {
			return nil, fmt.Errorf("its tools/list result is unusable: %w", err)
		}
		raws = append(raws, tools...)
		if next == "" || next == cursor {
			break
		}
		cursor = next
	}
	tools := ParseTools(raws)
	if s.protocol() != "" && s.child == nil {
		skipBadHeaders(tools)
	}
	return tools, nil
}

// skipBadHeaders marks the tools whose x-mcp-header annotations break the
// 2026-07-28 rules: over HTTP a client must not call them, since the
// headers it would send from them are not well defined.
func skipBadHeaders(tools []ToolInfo) {
	for i, t := range tools {
		if t.Skip != "" {
			continue
		}
		if err := mcp.ValidateParamHeaderAnnotations(&mcp.Tool{Name: t.Name, RawInputSchema: t.InputSchema}); err != nil {
			tools[i].Skip = "its x-mcp-header annotations are invalid: " + printable.Log(clip(err.Error(), 200))
		}
	}
}

// toolsPage reads one page of tools/list; a member of the wrong JSON type
// is named (the entries themselves are ParseTools's).
func toolsPage(raw json.RawMessage) (tools []json.RawMessage, next string, err error) {
	var page map[string]json.RawMessage
	if json.Unmarshal(raw, &page) != nil {
		return nil, "", fmt.Errorf("it is %s, not an object", mcpwire.TypeOf(raw))
	}
	if t := page["tools"]; !mcpwire.IsNull(t) && json.Unmarshal(t, &tools) != nil {
		return nil, "", fmt.Errorf("tools is %s, not an array", mcpwire.TypeOf(t))
	}
	if c := page["nextCursor"]; !mcpwire.IsNull(c) && json.Unmarshal(c, &next) != nil {
		return nil, "", fmt.Errorf("nextCursor is %s, not a string", mcpwire.TypeOf(c))
	}
	return tools, next, nil
}

// connect starts the server and completes initialize and the first
// tools/list within the start timeout.
func (c *Client) connect(ctx context.Context) (_ *serverConn, _ []ToolInfo, startErr error) {
	ctx, cancel := context.WithTimeout(ctx, c.deps.StartTimeout)
	defer cancel()
	conn := &serverConn{name: c.spec.Name, done: make(chan struct{}), closing: make(chan struct{}), started: time.Now(),
		log: c.log, panicAt: c.deps.panicAt}
	// A panic in the start (a server's reply the bridge mishandles) fails
	// this start as an error would, and leaves no process behind.
	defer guard(c.log, "the server's start", func(any) {
		conn.close()
		startErr = c.internalStartError()
	})
	conn.life, conn.endLife = context.WithCancel(context.Background())
	conn.declared = c.deps.Caps.get(ctx)
	conn.relayBound = c.deps.RelayTimeout
	if c.spec.Type == "http" || c.spec.Type == "sse" {
		// mcp-go's HTTP client gives a server→client request 30 s.
		conn.relayBound = min(max(conn.relayBound, time.Second), httpRelayBound)
	}
	var err error
	switch {
	case c.deps.dial != nil:
		err = c.deps.dial(ctx, conn)
	case c.spec.Type == "http" || c.spec.Type == "sse":
		err = c.dialHTTP(ctx, conn)
	default:
		err = c.spawn(conn)
	}
	if err != nil {
		conn.close() // whatever started before the failure
		// An SSE server's stream is opened here: a sign-in it needs (or a
		// stored token it refused) names its fix, as for initialize.
		if se := asSignIn(err); se != nil {
			return nil, nil, se
		}
		return nil, nil, c.startError(err.Error(), "error withheld", "(none)")
	}
	// The bridge answers the server's requests itself (relay.go): mcp-go's
	// own handler would answer what the client did not declare, too.
	if bi, ok := conn.tr.(transport.BidirectionalInterface); ok {
		bi.SetRequestHandler(conn.handleRequest)
	}
	fail := func(err error) (*serverConn, []ToolInfo, error) {
		// asSignIn, not a comparison of err with what signInError
		// returns: a server's error reply can have an uncomparable
		// dynamic type (mcp-go's UnsupportedProtocolVersionError holds a
		// slice), and == on it panics.
		if se := asSignIn(err); se != nil {
			conn.close()
			return nil, nil, se
		}
		if why := refusal(err); why != "" {
			conn.close()
			return nil, nil, c.startError(why, why, conn.stderrTail())
		}
		// A child that died makes the request fail a moment before its
		// exit is reaped: wait briefly so the error names the exit status.
		waitClosed(conn.done, 500*time.Millisecond)
		select {
		case <-conn.done:
			conn.awaitStderr()
			err = c.startError(conn.exitDesc(), conn.exitDesc(), conn.stderrTail())
		default:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("Server '%s' did not answer initialize within %ds (MCP_BRIDGE_START_TIMEOUT)", c.spec.Name, int(c.deps.StartTimeout/time.Second))
			} else {
				err = c.startError(err.Error(), "error withheld", conn.stderrTail())
			}
		}
		conn.close()
		return nil, nil, err
	}
	conn.mc.OnNotification(func(n mcp.JSONRPCNotification) {
		// It runs on the transport's reader, where a panic would end the
		// process: it ends the connection instead.
		defer guard(c.log, "a notification from the server", func(any) { conn.abort() })
		c.deps.panicAt.at("notification")
		switch n.Method {
		case "notifications/tools/list_changed":
			select {
			case c.events <- listChanged{}:
			default: // a refresh is already queued
			}
		case "notifications/progress":
			conn.progress.deliver(n.Params.AdditionalFields)
		}
	})
	// The era as the disk catalog (read when the actor began) or the last
	// start left it: no read on the start's path.
	cat := c.Reached()
	if err := c.reach(ctx, conn, cat); err != nil {
		if errors.Is(err, errExited) {
			return fail(errors.New("exited"))
		}
		return fail(err)
	}
	c.deps.panicAt.at("connect")
	tools, err := conn.listTools(ctx)
	if err != nil {
		return fail(err)
	}
	conn.probedAt = cat.Probed
	if conn.probed {
		conn.probedAt = time.Now()
	}
	if conn.protocol() != "" && conn.listChanged {
		conn.wg.Add(1)
		go conn.listen()
	}
	cat = conn.catalog(tools)
	c.deps.Store.Save(c.spec.Hash, cat)
	c.remember(cat)
	usable, _ := SplitTools(tools)
	ev := c.log.Info().Int("tools", len(usable)).Dur("startup_ms", time.Since(conn.started)).Str("version", conn.version)
	if p := conn.protocol(); p != "" {
		ev = ev.Str("protocol", p)
	}
	ev.Msg("server ready")
	return conn, tools, nil
}

// errExited is reach's error when the server exited during the start.
var errExited = errors.New("exited")

// reach opens the MCP conversation with a started server, in the era cat
// remembers for it (era.go): a modern one gets server/discover and, if
// that fails, initialize; any other gets initialize and, if it refuses
// naming a modern revision, server/discover. Either way the other era is
// tried at most once, in this start.
func (c *Client) reach(ctx context.Context, conn *serverConn, cat ServerCatalog) error {
	web := c.spec.Type == "http" || c.spec.Type == "sse"
	conn.probed = cat.Era == EraUnknown
	if cat.Era == EraModern {
		err := c.handshake(ctx, conn, conn.discoverAsStart)
		if err == nil || errors.Is(err, errExited) || ctx.Err() != nil {
			return err
		}
		c.log.Info().Err(err).Msg("server/discover failed for a server last reached as modern; trying initialize")
		conn.probed = true
		return c.handshake(ctx, conn, conn.initialize)
	}
	err := c.handshake(ctx, conn, conn.initialize)
	if err == nil || !modernRefusal(err, web) {
		return err
	}
	c.log.Info().Msg("the server refused initialize; reaching it as a 2026-07-28 server, with server/discover")
	conn.probed = true
	if derr := c.handshake(ctx, conn, conn.discoverAsStart); derr != nil {
		if errors.Is(derr, errExited) {
			return derr
		}
		return &bothErasError{initialize: err, discover: derr}
	}
	return nil
}

// handshake runs one opening exchange (initialize or discover) on its own
// goroutine, so a panic in it ends this start only, and the server's exit
// ends the wait.
func (c *Client) handshake(ctx context.Context, conn *serverConn, open func(context.Context) error) error {
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer guard(c.log, "the server's initialize", func(any) {
			conn.abort()
			done <- errInternal // 1-buffered, and nothing was sent
		})
		c.deps.panicAt.at("initialize")
		done <- open(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-conn.done:
		cancel()
		<-done
		return errExited
	}
}

// initialize is the legacy opening: initialize at childProtocolVersion.
func (s *serverConn) initialize(ctx context.Context) error {
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = childProtocolVersion
	req.Params.ClientInfo = bridgeInfo
	req.Params.Capabilities = s.declared.declared()
	res, err := s.mc.Initialize(ctx, req)
	if err != nil {
		return err
	}
	s.version = res.ServerInfo.Version
	s.legacyVersion = res.ProtocolVersion
	s.toolTasks = toolCallTasks(res.Capabilities)
	return nil
}

// discoverAsStart is the modern opening: server/discover, bounded by
// discoverBound, its serverInfo the server's version.
func (s *serverConn) discoverAsStart(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, discoverBound)
	defer cancel()
	res, err := s.discover(ctx)
	if err != nil {
		return err
	}
	if info, ok := serverInfoOf(res.Meta); ok {
		s.version = info.Version
	}
	s.listChanged = res.Capabilities.Tools != nil && res.Capabilities.Tools.ListChanged
	return nil
}

// catalog is the catalog of this connection's server with tools; it keeps
// their schemas for the headers of modern requests.
func (s *serverConn) catalog(tools []ToolInfo) ServerCatalog {
	s.schemas.set(tools)
	cat := ServerCatalog{Tools: tools, Version: s.version, Era: EraLegacy, Protocol: s.legacyVersion, Probed: s.probedAt}
	if p := s.protocol(); p != "" {
		cat.Era, cat.Protocol = EraModern, p
	}
	return cat
}

// bothErasError is a start that failed in both eras: initialize was
// refused for a modern revision, and server/discover failed as well.
type bothErasError struct{ initialize, discover error }

func (e *bothErasError) Error() string {
	return fmt.Sprintf("%v; server/discover: %v", e.initialize, e.discover)
}

// refusal is why a server refused initialize, in words a user can act on,
// for the refusals mcp-go decodes into types of their own; "" for others.
func refusal(err error) string {
	var version mcp.UnsupportedProtocolVersionError
	var url mcp.URLElicitationRequiredError
	var both *bothErasError
	switch {
	case errors.As(err, &both):
		how := "(-32022)"
		if !errors.As(both.initialize, &version) {
			how = "with an HTTP 4xx status (a legacy SSE server? then set \"type\": \"sse\")"
		}
		return fmt.Sprintf("it refused initialize for MCP %s %s, and its server/discover for %s failed too: %s; check that it is an MCP server of either revision",
			childProtocolVersion, how, modernVersion, printable.Log(clip(both.discover.Error(), 200)))
	case errors.As(err, &version):
		supported := "another version"
		var named []string
		for _, v := range version.Supported {
			if v = strings.TrimSpace(v); v != "" {
				named = append(named, v)
			}
		}
		if len(named) > 0 {
			supported = printable.Log(clip(strings.Join(named, ", "), 80))
		}
		return fmt.Sprintf("it refused MCP protocol version %s and supports only %s (-32022), none of which the bridge speaks (it speaks %s and %s); pin a release of the server that supports one of them",
			childProtocolVersion, supported, childProtocolVersion, modernVersion)
	case errors.As(err, &url):
		return "it asked for a sign-in through a URL before it would initialize (-32042), which the bridge cannot relay while it starts a server; sign in to the server another way (its docs say how), or configure a token in its env or headers"
	}
	return ""
}

// StartError is a server's start failure (VAL-3). Its message carries the
// child's stderr tail and the error text, which can name host paths or
// echo secrets from the server's env; Redacted is the same failure without
// them, for sandbox calls that did not grant the server (issue 13).
type StartError struct {
	msg, redacted string
}

func (e *StartError) Error() string { return e.msg }

// Redacted is the message without stderr or host details.
func (e *StartError) Redacted() string { return e.redacted }

// startError builds the VAL-3 error: reason and tail go in the full
// message; safeReason (an exit status, or a placeholder) in the redacted one.
func (c *Client) startError(reason, safeReason, tail string) error {
	return &StartError{
		msg: fmt.Sprintf("Server '%s' failed to start: %s; last stderr: %s", c.spec.Name, reason, tail),
		redacted: fmt.Sprintf("Server '%s' failed to start: %s; last stderr: (withheld: add the server to the servers argument of run_python to see it)",
			c.spec.Name, safeReason),
	}
}

// RedactedError is err as a sandbox may see it when its call did not grant
// the server: a StartError loses its stderr and host details.
func RedactedError(err error) string {
	var se *StartError
	if errors.As(err, &se) {
		return se.Redacted()
	}
	return err.Error()
}

// spawn starts a stdio child with an explicit environment (ENV-1) in its
// own process group, its stderr drained into a ring buffer (PXY-1).
func (c *Client) spawn(conn *serverConn) error {
	if c.spec.Cwd != "" {
		if st, err := os.Stat(c.spec.Cwd); err != nil || !st.IsDir() {
			return fmt.Errorf("cwd %q does not exist or is not a directory", c.spec.Cwd)
		}
	}
	cmd := exec.Command(c.spec.Command, c.spec.Args...)
	cmd.Env = c.spec.Env
	cmd.Dir = c.spec.Cwd
	ch, err := childproc.StartChild(cmd, false, c.log)
	if err != nil {
		return err
	}
	conn.child, conn.proc, conn.stderr = ch, ch.Proc, ch.Stderr
	if c.deps.Children != nil {
		conn.children = c.deps.Children
		conn.children.Add(cmd.Process.Pid)
	}
	tr := mcpwire.New(ch.Stdout, ch.Stdin, mcpwire.Options{Server: c.spec.Name, MaxFrame: c.deps.MaxFrame, Log: c.log})
	conn.wg.Add(1)
	go func() {
		defer conn.wg.Done()
		// The process's exit, or the end of its stream while it lives on
		// (a stalled write, a reader that panicked): either ends the
		// connection, and the actor restarts the server.
		exited := true
		select {
		case <-ch.Exited():
		case <-tr.Done():
			// Mostly the EOF of an exit: its status names it better,
			// once reaped.
			exited = ch.WaitExit(time.Second)
		}
		why := ""
		if !exited {
			why = tr.Err().Error()
		}
		conn.markDone(why)
	}()
	conn.tr = tr
	conn.mc = client.NewClient(conn.tr)
	return conn.mc.Start(context.Background())
}

// dialHTTP connects to a streamable HTTP or SSE server with the configured
// headers (CFG-3); a lost connection counts as a crash.
func (c *Client) dialHTTP(ctx context.Context, conn *serverConn) error {
	var err error
	// Each request's trace context goes in its headers too (trace.go).
	sseOpts := []transport.ClientOption{client.WithHeaders(c.spec.Headers), transport.WithHeaderFunc(TraceHeaders)}
	httpOpts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(c.spec.Headers), transport.WithHTTPHeaderFunc(TraceHeaders)}
	if u, err := url.Parse(c.spec.URL); err == nil {
		conn.host = u.Hostname()
	}
	// Every response body meets the stdio transport's rules before mcp-go
	// reads it (mcpwire.HTTPFilter), over the sign-in's transport if any.
	hc := &http.Client{Transport: mcpwire.HTTPFilter(c.spec.Transport, c.spec.Name, c.deps.MaxFrame)}
	sseOpts = append(sseOpts, transport.WithHTTPClient(hc))
	httpOpts = append(httpOpts, transport.WithHTTPBasicClient(hc))
	if c.spec.Type == "sse" {
		conn.mc, err = client.NewSSEMCPClient(c.spec.URL, sseOpts...)
	} else {
		conn.mc, err = client.NewStreamableHttpClient(c.spec.URL, httpOpts...)
	}
	if err != nil {
		return err
	}
	conn.tr = conn.mc.GetTransport()
	conn.mc.OnConnectionLost(func(err error) { conn.markDone("connection lost: " + err.Error()) })
	// The stream lives as long as the connection, not the start timeout.
	lifetime, cancel := context.WithCancel(context.Background())
	conn.cancel = cancel
	return conn.mc.Start(lifetime)
}

// close stops the server (PXY-4): close stdin, SIGTERM the process group
// after 1 s, SIGKILL it 2 s later. mcp-go's Close is not used for stdio
// children because it can wait 8 s.
func (s *serverConn) close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		if s.endLife != nil {
			s.endLife()
		}
		if s.proc == nil {
			if s.mc != nil {
				_ = s.mc.Close()
			}
			if s.cancel != nil {
				s.cancel()
			}
			s.markDone("closed")
			s.wg.Wait() // a modern server's listen stream, ended with its life
			return
		}
		s.child.Stop(time.Second, 2*time.Second)
		if s.children != nil {
			s.children.Remove(s.proc.Pid())
		}
		if s.tr != nil { // nil when the start ended between the spawn and the transport
			_ = s.tr.Close()
		}
		s.child.Release(time.Second)
		s.wg.Wait()
	})
}

// awaitStderr gives the stderr drain a moment after an exit, so error
// messages carry the child's last words.
func (s *serverConn) awaitStderr() {
	if s.stderr != nil {
		s.stderr.WaitDrained(500 * time.Millisecond)
	}
}
