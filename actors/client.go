package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// childProtocolVersion is what initialize asks a server for (PXY-2):
// pinning the legacy revision skips mcp-go's own server/discover probe;
// era.go reaches modern servers.
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
	// Transport, for http and sse, carries the server's sign-in (engine/oauth);
	// nil: plain HTTP.
	Transport http.RoundTripper
	// SignIn, when set, signs in to the server within ctx's call (through
	// Transport, so the store then holds the token): a start runs in the
	// background where no one can be asked, so a use whose call can reach
	// a person signs in this way and starts the server again (signin.go).
	SignIn func(ctx context.Context) error
	// ForPrincipal, when set (identity: principal under bridge serve), is
	// the spec of principal's own connection to the server: its Transport
	// and SignIn carry that principal's sign-in only (identities.go).
	ForPrincipal func(principal string) ServerSpec
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
	// Skip, when set, says why the bridge cannot use this entry
	// (toolentry.go). Such an entry stays in a server's list so the disk
	// catalog keeps the raw tools/list and doctor and describe_server can
	// name it; the catalog (newCatalogServer) keeps it out of everything
	// else: search, calls and the sandbox never see it.
	Skip string
}

// ServerCatalog is what the disk remembers of a server (PXY-8): its tools/list,
// and how it was last reached.
type ServerCatalog struct {
	Tools []ToolInfo
	// Version is the server's own, from its serverInfo.
	Version string
	// Era is the generation it was last reached with, Protocol the
	// revision (modern only), Probed when the era was last found by
	// probing rather than remembered; zero before a first start.
	Era      Era
	Protocol string
	Probed   time.Time
}

// CatalogStore persists each server's catalog by config hash (PXY-8).
type CatalogStore interface {
	Load(hash string) (ServerCatalog, bool)
	Save(hash string, c ServerCatalog)
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
	// Caps is the capability set declared to the servers (relay.go); nil
	// declares none. RelayTimeout bounds a relayed question.
	Caps         *UpstreamCaps
	RelayTimeout time.Duration
	// MaxFrame caps one line from a stdio server (MCP_BRIDGE_MAX_FRAME_BYTES);
	// 0: the default, 16 MiB.
	MaxFrame int
	// MaxIdentityConns caps the live (server, principal) connections of
	// one identity: principal server (MCP_BRIDGE_MAX_IDENTITY_CONNS).
	MaxIdentityConns int

	// dial, when set, connects in place of a process or an HTTP session:
	// unit tests serve an in-process server over net.Pipe with it.
	dial func(ctx context.Context, conn *serverConn) error
	// panicAt injects panics into the guarded goroutines (guard.go) in
	// tests; nil in production.
	panicAt panicHook
}

// Client is the actor of one proxied server (PXY-1): it starts the server on
// first use, keeps it warm, restarts it with backoff when it dies, and
// refreshes its tools on list_changed. Calls run on the caller's goroutine
// against the current connection; the actor only manages its lifecycle.
type Client struct {
	spec ServerSpec
	deps *ClientDeps
	log  zerolog.Logger

	uses   chan request[struct{}, useReply]
	events chan clientEvent
	// kicks asks for a start in the background (search starts servers
	// without a catalog this way, and waits 2 s at most for them);
	// buffered, one pending.
	kicks chan struct{}
	// state is what the actor last reported about its process, for
	// readers that must not wait on the actor (search). Written by Serve.
	state atomic.Pointer[ClientState]
	// reached is how the server was last reached (its catalog without the
	// tools), for describe_server and doctor; nil before a catalog or a
	// start says.
	reached atomic.Pointer[ServerCatalog]
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
	waiters   []request[struct{}, useReply]
	restart   *time.Timer // the next start after a failure or exit; nil when none is due
	refresh   *time.Timer // the tools/list after list_changed; nil when none is due
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

// NewClient returns the actor for spec.
func NewClient(spec ServerSpec, deps *ClientDeps) *Client {
	return &Client{
		spec: spec, deps: deps,
		log:     deps.Log.With().Str("actor", "client").Str("server", spec.Name).Logger(),
		uses:    make(chan request[struct{}, useReply]),
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
	return c.signingIn(ctx, c.useOnce)
}

func (c *Client) useOnce(ctx context.Context) (useReply, error) {
	r, err := ask(ctx, c.uses, nil, struct{}{})
	if err != nil {
		return useReply{}, c.ctxErr(ctx)
	}
	return r, r.err
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

// Reached is how the server was last reached (ServerCatalog.DescribeEra),
// without its tools; the zero value before anything is known. It never
// waits on the actor.
func (c *Client) Reached() ServerCatalog {
	if c == nil {
		return ServerCatalog{}
	}
	if r := c.reached.Load(); r != nil {
		return *r
	}
	return ServerCatalog{}
}

// remember publishes cat for Reached.
func (c *Client) remember(cat ServerCatalog) {
	cat.Tools = nil
	c.reached.Store(&cat)
}

// Tools returns the server's tools, starting it if needed.
func (c *Client) Tools(ctx context.Context) ([]ToolInfo, error) {
	r, err := c.use(ctx)
	return r.tools, err
}

// Ready starts the server if needed, bounded by the start timeout, and
// returns its current tools.
func (c *Client) Ready(ctx context.Context) ([]ToolInfo, error) {
	// A sign-in between the two tries is not bounded by the start timeout:
	// the person may take minutes in the browser.
	r, err := c.signingIn(ctx, func(ctx context.Context) (useReply, error) {
		ctx, cancel := context.WithTimeout(ctx, c.deps.StartTimeout+time.Second)
		defer cancel()
		return c.useOnce(ctx)
	})
	return r.tools, err
}

// Call forwards tools/call with raw arguments and returns the raw result.
// The wait is bounded by timeout; limit names the setting it came from, for
// the timeout message (TMO-4). The request carries its own progress token;
// the server's progress for it goes to onProgress (nil: dropped) until Call
// returns. A call abandoned before its reply (the timeout, or ctx ending) is
// cancelled upstream with notifications/cancelled.
func (c *Client) Call(ctx context.Context, tool string, args json.RawMessage, timeout time.Duration, limit string, onProgress func(UpstreamProgress)) (json.RawMessage, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return c.roundTrip(ctx, "tools/call", func(token string) any {
		return map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{"progressToken": token}}
	}, fmt.Sprintf("Tool call %s.%s", c.spec.Name, tool), timeout, limit, onProgress)
}

// roundTrip sends one request built by params (given the request's progress
// token) on a live connection and returns its raw result, as Call describes;
// what names the request in the timeout message.
func (c *Client) roundTrip(ctx context.Context, method string, params func(token string) any, what string, timeout time.Duration, limit string, onProgress func(UpstreamProgress)) (json.RawMessage, error) {
	r, err := c.use(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := r.conn.nextID()
	token := fmt.Sprint(id.Value()) // the request id: unique among this connection's requests in flight
	if onProgress != nil {
		r.conn.progress.add(token, onProgress)
		defer r.conn.progress.remove(token)
	}
	cctx, untrack := r.conn.track(ctx, cctx, c.spec.Name, method)
	r.conn.inflight.Add(1)
	x := &exchange{conn: r.conn, method: method, params: params(token), id: id}
	res, err := r.conn.requestID(cctx, id, method, x.params)
	if err == nil {
		res, err = x.follow(cctx, res, onProgress) // a modern server's rounds and tasks (mrtr.go)
	}
	r.conn.inflight.Add(-1)
	untrack()
	if err == nil {
		r.conn.served.Store(true)
		return res, nil
	}
	return nil, c.failed(ctx, cctx, r.conn, err, what, timeout, limit, x.cancel)
}

// failed is the error of a request on conn that failed with err under
// cctx, the request's bound (timeout, set by limit) of the caller's ctx.
// A request its context abandoned before the reply is cancelled upstream
// first, with the reason: the timeout, or ctx's cause.
func (c *Client) failed(ctx, cctx context.Context, conn *serverConn, err error, what string, timeout time.Duration, limit string, cancelUpstream func(reason string)) error {
	if !answered(err) && cctx.Err() == nil {
		// mcp-go's SSE transport gives up on its own timer, a moment
		// before the deadline: that is the bridge's timeout too.
		if d, ok := cctx.Deadline(); ok && time.Until(d) < nearDeadline {
			<-cctx.Done()
		}
	}
	// Read once: a deadline passing between two reads must not make the
	// call look cancelled by its caller, whose cause is then nil.
	ended := cctx.Err()
	timedOut := errors.Is(ended, context.DeadlineExceeded) && ctx.Err() == nil
	if !answered(err) && ended != nil {
		reason := fmt.Sprintf("timed out after %s (%s)", timeout.Round(time.Millisecond), limit)
		if cause := context.Cause(ctx); !timedOut && cause != nil {
			reason = cause.Error()
		}
		cancelUpstream(reason)
	}
	return c.callError(conn, err, ended != nil, timedOut, what, timeout, limit)
}

// nearDeadline is how close to its deadline a transport's failure counts as
// the deadline's.
const nearDeadline = 100 * time.Millisecond

// callError is the error of a request on conn that failed with err:
// the server's removal, its exit, the bridge's timeout (what timed out
// after timeout, set by limit), or err itself. ended says the request's
// context ended.
func (c *Client) callError(conn *serverConn, err error, ended, timedOut bool, what string, timeout time.Duration, limit string) error {
	if why, ok := c.removed.Load().(string); ok {
		return errors.New(why)
	}
	if !answered(err) && !ended {
		// A transport error: the child may be dying; its exit is reaped a
		// moment later, and the error should name it.
		waitClosed(conn.done, 500*time.Millisecond)
	}
	select {
	case <-conn.done:
		conn.awaitStderr()
		return fmt.Errorf("Server '%s' exited during the call (%s); last stderr: %s", c.spec.Name, conn.exitDesc(), conn.stderrTail())
	default:
	}
	if timedOut {
		return &callTimeoutError{fmt.Sprintf("%s timed out after %ds (%s)", what, max(1, int(timeout.Round(time.Second)/time.Second)), limit)}
	}
	return signInError(err)
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
