package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
)

// childProtocolVersion is pinned for children (PXY-2): asking for a legacy
// version skips mcp-go's multi-second server/discover probe.
const childProtocolVersion = "2025-11-25"

// Restart policy (PXY-3).
const (
	backoffStart   = 500 * time.Millisecond
	backoffMax     = 30 * time.Second
	uptimeReset    = 60 * time.Second
	parkAfter      = 5
	listChangedGap = 100 * time.Millisecond
)

// ServerSpec is one configured server, normalized by the engine.
type ServerSpec struct {
	Name        string
	Alias       string
	Description string
	Type        string // stdio, http or sse
	Command     string
	Args        []string
	Env         []string // the child's whole environment (ENV-1)
	Cwd         string
	URL         string
	Headers     map[string]string
	Hash        string // config hash; keys the disk catalog and the reload diff
}

// ToolInfo is one tool as a server listed it: the raw JSON object and the
// fields the bridge uses.
type ToolInfo struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  json.RawMessage
	Raw          json.RawMessage
}

// CatalogStore persists each server's tools/list by config hash (PXY-8).
type CatalogStore interface {
	Load(hash string) ([]ToolInfo, bool)
	Save(hash, version string, tools []ToolInfo)
}

// ChildRegistry records stdio children on disk, so a bridge started after
// this one was SIGKILLed can remove the process groups it left (LIF).
type ChildRegistry interface {
	Add(pid int)
	Remove(pid int)
}

// ClientDeps is what every client actor shares.
type ClientDeps struct {
	StartTimeout time.Duration
	CallTimeout  time.Duration
	// IdleTimeout stops a server with no call for this long; <= 0 never.
	IdleTimeout time.Duration
	Children    ChildRegistry // nil: children are not recorded
	Store       CatalogStore
	// OnTools reports a server's fresh tool list to the servers manager; it
	// must not block.
	OnTools func(name, hash string, tools []ToolInfo)
	Log     zerolog.Logger
}

// Client is the actor of one proxied server (PXY-1): it starts the server on
// first use, keeps it warm, restarts it with backoff when it dies, and
// refreshes its tools on list_changed. Calls run on the caller's goroutine
// against the current connection; the actor only manages its lifecycle.
type Client struct {
	spec ServerSpec
	deps *ClientDeps
	log  zerolog.Logger

	uses   chan chan useReply
	events chan clientEvent
	// removed is why a reload stops this actor: written once by the servers
	// manager (retire) before it removes the actor's supervisor, read by
	// callers whose call fails; Serve never touches it.
	removed atomic.Value // string

	// Owned by the Serve goroutine. reset clears what one run leaves behind,
	// so a run after a panic starts from no connection and no waiters.
	conn      *serverConn
	starting  bool
	waiters   []chan useReply
	failures  int
	nextStart time.Time
	lastErr   error
	tools     []ToolInfo
	eager     bool // restart without waiting for a use (after a crash)
	lastUse   time.Time
	wg        sync.WaitGroup
}

type useReply struct {
	conn  *serverConn
	tools []ToolInfo
	err   error
}

type clientEvent struct {
	kind  int // evStarted, evFailed, evExited, evListChanged, evTools
	conn  *serverConn
	tools []ToolInfo
	err   error
}

const (
	evStarted = iota
	evFailed
	evExited
	evListChanged
	evTools
)

// NewClient returns the actor for spec.
func NewClient(spec ServerSpec, deps *ClientDeps) *Client {
	return &Client{
		spec: spec, deps: deps,
		log:    deps.Log.With().Str("actor", "client").Str("server", spec.Name).Logger(),
		uses:   make(chan chan useReply),
		events: make(chan clientEvent, 8),
	}
}

func (c *Client) String() string { return "client:" + c.spec.Name }

// Spec returns the server's configuration.
func (c *Client) Spec() ServerSpec { return c.spec }

// use returns a live connection, starting the server if needed.
func (c *Client) use(ctx context.Context) (useReply, error) {
	reply := make(chan useReply, 1)
	select {
	case c.uses <- reply:
	case <-ctx.Done():
		return useReply{}, c.ctxErr(ctx)
	}
	select {
	case r := <-reply:
		return r, r.err
	case <-ctx.Done():
		return useReply{}, c.ctxErr(ctx)
	}
}

func (c *Client) ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("Server '%s' did not answer initialize within %ds (MCP_BRIDGE_START_TIMEOUT)", c.spec.Name, int(c.deps.StartTimeout/time.Second))
	}
	return fmt.Errorf("Server '%s' was stopped: %w", c.spec.Name, ctx.Err())
}

// Tools returns the server's tools, starting it if needed.
func (c *Client) Tools(ctx context.Context) ([]ToolInfo, error) {
	r, err := c.use(ctx)
	return r.tools, err
}

// Ready starts the server if needed, bounded by the start timeout, and
// returns its current tools.
func (c *Client) Ready(ctx context.Context) ([]ToolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.deps.StartTimeout+time.Second)
	defer cancel()
	r, err := c.use(ctx)
	return r.tools, err
}

// Call forwards tools/call with raw arguments and returns the raw result.
// The wait is bounded by timeout; limit names the setting it came from, for
// the timeout message (TMO-4).
func (c *Client) Call(ctx context.Context, tool string, args json.RawMessage, timeout time.Duration, limit string) (json.RawMessage, error) {
	r, err := c.use(ctx)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.conn.inflight.Add(1)
	res, err := r.conn.request(cctx, "tools/call", map[string]any{"name": tool, "arguments": args})
	r.conn.inflight.Add(-1)
	if err == nil {
		r.conn.served.Store(true)
		return res, nil
	}
	if why, ok := c.removed.Load().(string); ok {
		return nil, errors.New(why)
	}
	var rpcErr *rpcError
	if !errors.As(err, &rpcErr) && cctx.Err() == nil {
		// A transport error: the child may be dying; its exit is reaped a
		// moment later, and the error should name it.
		waitClosed(r.conn.done, 500*time.Millisecond)
	}
	select {
	case <-r.conn.done:
		r.conn.awaitStderr()
		return nil, fmt.Errorf("Server '%s' exited during the call (%s); last stderr: %s", c.spec.Name, r.conn.exitDesc(), r.conn.stderrTail())
	default:
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, &callTimeoutError{fmt.Sprintf("Tool call %s.%s timed out after %ds (%s)", c.spec.Name, tool, max(1, int(timeout.Round(time.Second)/time.Second)), limit)}
	}
	return nil, err
}

// ErrCallTimeout marks a tool call that the bridge's own deadline ended
// (TMO-4); a server's error text never matches it.
var ErrCallTimeout = errors.New("call timeout")

// callTimeoutError keeps ErrCallTimeout out of the message while errors.Is
// still finds it.
type callTimeoutError struct{ msg string }

func (e *callTimeoutError) Error() string { return e.msg }
func (e *callTimeoutError) Unwrap() error { return ErrCallTimeout }

// retire records why a reload stops the actor; the servers manager calls
// it before it removes the actor's supervisor.
func (c *Client) retire(why string) { c.removed.Store(why) }

// reset clears the state one Serve run leaves behind.
func (c *Client) reset() {
	c.conn, c.starting, c.waiters, c.eager = nil, false, nil, false
}

// Serve runs the actor until ctx ends, then stops the server. suture calls
// it again after a panic: every run starts from no connection and no
// waiters, and answers each waiter it took exactly once.
func (c *Client) Serve(ctx context.Context) error {
	c.reset()
	var (
		restart   *time.Timer
		refresh   *time.Timer
		restartC  <-chan time.Time
		refreshC  <-chan time.Time
		startCtx  context.Context
		cancelRun context.CancelFunc
	)
	startCtx, cancelRun = context.WithCancel(ctx)
	defer func() {
		cancelRun()
		if c.conn != nil {
			c.conn.close()
		}
		c.wg.Wait()
		c.dropEvents()
		why := fmt.Errorf("Server '%s' was removed from the configuration", c.spec.Name)
		if ctx.Err() == nil { // a panic, not a stop
			why = fmt.Errorf("Server '%s' was restarted after an internal error; retry the call", c.spec.Name)
		}
		for _, w := range c.waiters {
			w <- useReply{err: why}
		}
		c.reset()
	}()
	if tools, ok := c.deps.Store.Load(c.spec.Hash); ok {
		c.tools = tools
	}
	var idleC <-chan time.Time
	if c.deps.IdleTimeout > 0 {
		t := time.NewTicker(max(c.deps.IdleTimeout/4, 50*time.Millisecond))
		defer t.Stop()
		idleC = t.C
	}
	for {
		select {
		case <-idleC:
			// A server in the middle of a call is never stopped.
			if c.conn != nil && c.conn.inflight.Load() == 0 && time.Since(c.lastUse) > c.deps.IdleTimeout {
				c.log.Info().Dur("idle", time.Since(c.lastUse).Round(time.Second)).Msg("server idle; stopping it")
				conn := c.conn
				c.conn = nil
				c.eager = false
				conn.close()
			}
		case w := <-c.uses:
			c.lastUse = time.Now()
			if c.conn != nil {
				w <- useReply{conn: c.conn, tools: c.tools}
				continue
			}
			c.waiters = append(c.waiters, w)
			if c.failures >= parkAfter {
				c.nextStart = time.Time{} // parked: a use makes one fresh attempt
			}
			c.maybeStart(startCtx)
			if c.conn == nil && !c.starting && restartC == nil {
				restart = time.NewTimer(time.Until(c.nextStart))
				restartC = restart.C
			}
		case <-restartC:
			restartC = nil
			c.maybeStart(startCtx)
		case ev := <-c.events:
			switch ev.kind {
			case evStarted:
				c.starting = false
				c.conn = ev.conn
				c.tools = ev.tools
				c.lastErr = nil
				c.deps.OnTools(c.spec.Name, c.spec.Hash, ev.tools)
				for _, w := range c.waiters {
					w <- useReply{conn: c.conn, tools: c.tools}
				}
				c.waiters = nil
				c.wg.Add(1)
				go c.watch(ev.conn)
			case evFailed:
				c.starting = false
				c.noteFailure(ev.err)
				for _, w := range c.waiters {
					w <- useReply{err: ev.err}
				}
				c.waiters = nil
				c.eager = false
			case evExited:
				if ev.conn != c.conn {
					continue
				}
				up := time.Since(ev.conn.started)
				c.conn = nil
				ev.conn.close()
				// A server that stayed up a minute, or answered a call, was
				// healthy: its crash starts the backoff over.
				if up >= uptimeReset || ev.conn.served.Load() {
					c.failures = 0
				}
				c.noteFailure(fmt.Errorf("exited (%s)", ev.conn.exitDesc()))
				c.log.Warn().Str("status", ev.conn.exitDesc()).Dur("uptime", up).Str("stderr", ev.conn.stderrTail()).
					Dur("restartIn", time.Until(c.nextStart)).Msg("server exited; restarting")
				c.eager = true
				if restart != nil {
					restart.Stop()
				}
				restart = time.NewTimer(time.Until(c.nextStart))
				restartC = restart.C
			case evListChanged:
				if refreshC == nil {
					refresh = time.NewTimer(listChangedGap)
					refreshC = refresh.C
				}
			case evTools:
				if ev.conn == c.conn {
					c.tools = ev.tools
					c.deps.OnTools(c.spec.Name, c.spec.Hash, ev.tools)
				}
			}
		case <-refreshC:
			refreshC = nil
			if c.conn != nil {
				conn := c.conn
				c.wg.Add(1)
				go func() {
					defer c.wg.Done()
					c.refreshTools(startCtx, conn)
				}()
			}
		case <-ctx.Done():
			if restart != nil {
				restart.Stop()
			}
			if refresh != nil {
				refresh.Stop()
			}
			return ctx.Err()
		}
	}
}

// dropEvents empties the mailbox after the run's goroutines have ended:
// a connection reported there but never taken is closed.
func (c *Client) dropEvents() {
	for {
		select {
		case ev := <-c.events:
			if ev.conn != nil && ev.kind == evStarted {
				ev.conn.close()
			}
		default:
			return
		}
	}
}

func (c *Client) noteFailure(err error) {
	c.lastErr = err
	c.failures++
	delay := backoffStart << min(c.failures-1, 6)
	c.nextStart = time.Now().Add(min(delay, backoffMax))
}

// maybeStart starts the server when nothing is starting and the backoff
// has passed. The start runs on its own goroutine and reports an event.
func (c *Client) maybeStart(ctx context.Context) {
	if c.conn != nil || c.starting || time.Now().Before(c.nextStart) {
		return
	}
	if len(c.waiters) == 0 && !c.eager {
		return
	}
	if c.failures >= parkAfter && len(c.waiters) == 0 {
		c.log.Warn().Int("failures", c.failures).Msg("server parked after repeated failures; the next use tries again")
		c.eager = false
		return
	}
	c.starting = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		conn, tools, err := c.connect(ctx)
		ev := clientEvent{kind: evStarted, conn: conn, tools: tools}
		if err != nil {
			ev = clientEvent{kind: evFailed, err: err}
		}
		select {
		case c.events <- ev:
		case <-ctx.Done():
			if conn != nil {
				conn.close()
			}
		}
	}()
}

// watch reports when the connection ends.
func (c *Client) watch(conn *serverConn) {
	defer c.wg.Done()
	<-conn.done
	select {
	case c.events <- clientEvent{kind: evExited, conn: conn}:
	case <-conn.closing:
	}
}

func (c *Client) refreshTools(ctx context.Context, conn *serverConn) {
	ctx, cancel := context.WithTimeout(ctx, c.deps.StartTimeout)
	defer cancel()
	tools, err := conn.listTools(ctx)
	if err != nil {
		c.log.Warn().Err(err).Msg("refreshing tools after list_changed")
		return
	}
	c.deps.Store.Save(c.spec.Hash, conn.version, tools)
	select {
	case c.events <- clientEvent{kind: evTools, conn: conn, tools: tools}:
	case <-ctx.Done():
	}
}

// serverConn is one running server: its process (stdio) or HTTP session,
// and the mcp-go client speaking to it.
type serverConn struct {
	name    string
	mc      *client.Client
	tr      transport.Interface
	proc    *process // nil for http/sse
	stdin   io.Closer
	readers []io.Closer
	stderr  *tailBuffer
	version string
	started time.Time
	ids     atomic.Int64
	// inflight counts calls in progress: written by callers (Client.Call),
	// read by Serve's idle check. served is set by the first successful
	// call and read by Serve when the server exits.
	inflight atomic.Int64
	served   atomic.Bool
	children ChildRegistry

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

func (s *serverConn) exitDesc() string {
	if s.proc != nil {
		select {
		case <-s.proc.exited:
			if s.proc.code > 128 {
				return fmt.Sprintf("killed by signal %d", s.proc.code-128)
			}
			return fmt.Sprintf("exit status %d", s.proc.code)
		default:
			return "still running"
		}
	}
	if why, ok := s.lost.Load().(string); ok {
		return why
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
	id := mcp.NewRequestId(fmt.Sprintf("bridge-%d", s.ids.Add(1)))
	resp, err := s.tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, &rpcError{method: method, msg: resp.Error.Message, code: resp.Error.Code}
	}
	return resp.Result, nil
}

// rpcError is a JSON-RPC error reply from a server (as opposed to a
// transport failure).
type rpcError struct {
	method string
	msg    string
	code   int
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s: %s (code %d)", e.method, e.msg, e.code) }

// listTools fetches every page of tools/list as raw tool objects.
func (s *serverConn) listTools(ctx context.Context) ([]ToolInfo, error) {
	var tools []ToolInfo
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
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range res.Tools {
			info, err := ParseTool(t)
			if err != nil {
				continue
			}
			tools = append(tools, info)
		}
		if res.NextCursor == "" || res.NextCursor == cursor {
			return tools, nil
		}
		cursor = res.NextCursor
	}
	return tools, nil
}

// ParseTool reads the fields the bridge uses from a raw tool object.
func ParseTool(raw json.RawMessage) (ToolInfo, error) {
	var t struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.Name == "" {
		return ToolInfo{}, errors.New("tool without a name")
	}
	if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	return ToolInfo{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
		OutputSchema: nullToNil(t.OutputSchema), Annotations: nullToNil(t.Annotations), Raw: raw}, nil
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if string(r) == "null" {
		return nil
	}
	return r
}

// connect starts the server and completes initialize and the first
// tools/list within the start timeout.
func (c *Client) connect(ctx context.Context) (*serverConn, []ToolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.deps.StartTimeout)
	defer cancel()
	conn := &serverConn{name: c.spec.Name, done: make(chan struct{}), closing: make(chan struct{}), started: time.Now()}
	var err error
	switch c.spec.Type {
	case "http", "sse":
		err = c.dialHTTP(ctx, conn)
	default:
		err = c.spawn(conn)
	}
	if err != nil {
		return nil, nil, c.startError(err.Error(), "error withheld", "(none)")
	}
	fail := func(err error) (*serverConn, []ToolInfo, error) {
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
		if n.Method == "notifications/tools/list_changed" {
			select {
			case c.events <- clientEvent{kind: evListChanged}:
			default: // a refresh is already queued
			}
		}
	})
	type initResult struct {
		res *mcp.InitializeResult
		err error
	}
	initDone := make(chan initResult, 1)
	go func() {
		req := mcp.InitializeRequest{}
		req.Params.ProtocolVersion = childProtocolVersion
		req.Params.ClientInfo = mcp.Implementation{Name: "bridge", Version: "1"}
		res, err := conn.mc.Initialize(ctx, req)
		initDone <- initResult{res, err}
	}()
	var ir initResult
	select {
	case ir = <-initDone:
	case <-conn.done:
		cancel()
		<-initDone
		return fail(errors.New("exited"))
	}
	if ir.err != nil {
		return fail(ir.err)
	}
	conn.version = ir.res.ServerInfo.Version
	tools, err := conn.listTools(ctx)
	if err != nil {
		return fail(err)
	}
	c.deps.Store.Save(c.spec.Hash, conn.version, tools)
	c.log.Info().Int("tools", len(tools)).Dur("startup", time.Since(conn.started)).Str("version", conn.version).Msg("server ready")
	return conn, tools, nil
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
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	conn.proc, err = startProcess(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		stdin.Close()
		return err
	}
	conn.stdin = stdin
	conn.readers = []io.Closer{outR, errR}
	if c.deps.Children != nil {
		conn.children = c.deps.Children
		conn.children.Add(cmd.Process.Pid)
	}
	conn.stderr = newTailBuffer(50, 8<<10)
	conn.wg.Add(2)
	go func() {
		defer conn.wg.Done()
		conn.stderr.drain(errR, c.log)
	}()
	go func() {
		defer conn.wg.Done()
		<-conn.proc.exited
		conn.markDone("")
	}()
	conn.tr = transport.NewIO(outR, stdin, nil)
	conn.mc = client.NewClient(conn.tr)
	return conn.mc.Start(context.Background())
}

// dialHTTP connects to a streamable HTTP or SSE server with the configured
// headers (CFG-3); a lost connection counts as a crash.
func (c *Client) dialHTTP(ctx context.Context, conn *serverConn) error {
	var err error
	if c.spec.Type == "sse" {
		conn.mc, err = client.NewSSEMCPClient(c.spec.URL, client.WithHeaders(c.spec.Headers))
	} else {
		conn.mc, err = client.NewStreamableHttpClient(c.spec.URL, transport.WithHTTPHeaders(c.spec.Headers))
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
		if s.proc == nil {
			if s.mc != nil {
				_ = s.mc.Close()
			}
			if s.cancel != nil {
				s.cancel()
			}
			s.markDone("closed")
			return
		}
		_ = s.stdin.Close()
		if !waitClosed(s.proc.exited, time.Second) {
			s.proc.signalGroup(syscall.SIGTERM)
			if !waitClosed(s.proc.exited, 2*time.Second) {
				s.proc.signalGroup(syscall.SIGKILL)
				<-s.proc.exited
			}
		}
		// A wrapper (npx-style) may have exited while its child lives on
		// in the group holding our pipes: nothing of the group outlives it.
		s.proc.signalGroup(syscall.SIGKILL)
		if s.children != nil {
			s.children.Remove(s.proc.cmd.Process.Pid)
		}
		s.stderr.waitDrained(time.Second)
		_ = s.tr.Close()
		for _, r := range s.readers {
			_ = r.Close()
		}
		s.wg.Wait()
	})
}

func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// awaitStderr gives the stderr drain a moment after an exit, so error
// messages carry the child's last words.
func (s *serverConn) awaitStderr() {
	if s.stderr != nil {
		s.stderr.waitDrained(500 * time.Millisecond)
	}
}
