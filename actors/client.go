package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
	// kicks asks for a start in the background (search covers servers
	// without a catalog this way and never waits); buffered, one pending.
	kicks chan struct{}
	// state is what the actor last reported about its process, for
	// readers that must not wait on the actor (search). Written by Serve.
	state atomic.Pointer[ClientState]
	// removed is why a reload stops this actor: written once by the servers
	// manager (retire) before it removes the actor's supervisor, read by
	// callers whose call fails; Serve never touches it.
	removed atomic.Value // string
	// after, when set, is the stopped channel of the client this one
	// replaces (same name, stopping after a reload): no server process
	// starts before the old one is dead. Set by Servers before Serve runs.
	after <-chan struct{}
	// stopped is closed when a run ends because its context ended (a
	// removal or the bridge's stop), once the server process is dead and
	// after has closed (or 10 s passed).
	stopped  chan struct{}
	stopOnce sync.Once

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
	startedAt time.Time // when the running start began
	wg        sync.WaitGroup
}

// ClientState is a server's start state as search reports it for a server
// it could not cover. The zero value is a server that was never started.
type ClientState struct {
	Ready    bool
	Starting time.Time // when the current start began; zero when none runs
	Err      error     // the last start failure or exit, until a start succeeds
	Failures int
	RetryAt  time.Time // the next automatic start after a failure; zero when parked
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
		log:     deps.Log.With().Str("actor", "client").Str("server", spec.Name).Logger(),
		uses:    make(chan chan useReply),
		events:  make(chan clientEvent, 8),
		kicks:   make(chan struct{}, 1),
		stopped: make(chan struct{}),
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

// Kick asks the actor to start the server in the background, unless it runs,
// is starting, or is parked after repeated failures (the next use tries
// again). It never blocks.
func (c *Client) Kick() {
	select {
	case c.kicks <- struct{}{}:
	default:
	}
}

// State returns what the actor last published about its server; it never
// waits on the actor.
func (c *Client) State() ClientState {
	if s := c.state.Load(); s != nil {
		return *s
	}
	return ClientState{}
}

// publish records the state for State.
func (c *Client) publish() {
	s := &ClientState{Ready: c.conn != nil, Err: c.lastErr, Failures: c.failures}
	if c.starting {
		s.Starting = c.startedAt
	}
	if !s.Ready && c.lastErr != nil && c.failures < parkAfter {
		s.RetryAt = c.nextStart
	}
	c.state.Store(s)
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
		if ctx.Err() != nil {
			// A successor must also wait for the process this one waited
			// for (removed again before its predecessor died).
			if c.after != nil {
				waitClosed(c.after, 10*time.Second)
			}
			c.stopOnce.Do(func() { close(c.stopped) })
		}
	}()
	if tools, ok := c.deps.Store.Load(c.spec.Hash); ok {
		c.tools = tools
	} else if ctx.Err() == nil {
		// No catalog on disk: start in the background now, so the first
		// search finds the tools instead of waiting for them.
		c.Kick()
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
				c.publish()
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
		case <-c.kicks:
			if c.conn == nil && !c.starting && c.failures < parkAfter {
				c.lastUse = time.Now() // a kicked server is not idle yet
				c.eager = true
				c.maybeStart(startCtx)
				if !c.starting && restartC == nil {
					restart = time.NewTimer(time.Until(c.nextStart))
					restartC = restart.C
				}
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
				c.publish()
				for _, w := range c.waiters {
					w <- useReply{conn: c.conn, tools: c.tools}
				}
				c.waiters = nil
				c.wg.Add(1)
				go c.watch(ev.conn)
			case evFailed:
				c.starting = false
				c.noteFailure(ev.err)
				c.publish()
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
				c.publish()
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
	c.startedAt = time.Now()
	c.publish()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if c.after != nil {
			select {
			case <-c.after:
			case <-ctx.Done():
				return // Serve is ending and takes no event
			}
		}
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
