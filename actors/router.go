package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"
	"go.opentelemetry.io/otel/trace"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/alias"
	"github.com/bridge-mcp/bridge/protocol/search"
)

// Scope is the call a sandbox request belongs to: the session, the call
// number, the servers the call may use (the allow-list) and its deadline.
type Scope struct {
	Session string
	// Principal is who made the call ("" for stdio): it picks the store
	// and the policy's per-principal grants.
	Principal string
	Call      int64
	Servers   []string
	Deadline  time.Time
	// ToolCalls counts the execution's proxied tool calls, for the
	// policy's cap; nil means no counting.
	ToolCalls *atomic.Int64
	// Refused counts the execution's tool calls the policy refused: the
	// first is logged, the rest only counted, and the session logs the
	// count when the call ends (a loop of refused calls costs the log two
	// lines, not one each). nil logs every refusal.
	Refused *atomic.Int64
	// progress receives the upstream progress of the call's tool calls;
	// nil drops it.
	progress upstreamSink
	// human gives gated tool calls the call's approval state (approve.go);
	// nil: no one can be asked, and gated calls are refused.
	human humanSource
	// recorder receives the call's requests and approvals for the audit
	// trail; nil records nothing.
	recorder CallRecorder
	// span is the call's run_python span, the parent of its requests'
	// spans (trace.go); a no-op span when the call is not traced.
	span trace.Span
}

// log adds the call's session, call number and principal (under bridge
// serve: every principal's default session is "default") to ev.
func (s Scope) log(ev *zerolog.Event) *zerolog.Event {
	ev = ev.Str("session", s.Session).Int64("call", s.Call)
	if s.Principal != "" {
		ev = ev.Str("principal", s.Principal)
	}
	return ev
}

// RequestRouter serves box→host requests (list, docs, search, call_tool).
type RequestRouter interface {
	ServeSandbox(ctx context.Context, scope Scope, method string, params json.RawMessage) (any, error)
}

// Router is the frame router actor. It builds each catalog (aliases and the
// search index) from what the servers manager sends, and publishes it
// through an atomic pointer: requests read the current catalog without a
// message to the actor and are answered on the caller's goroutine, so tool
// calls from one sandbox run concurrently (CON-3).
type Router struct {
	// current is the latest catalog: written by Serve, read by anyone. A
	// catalog is immutable once published.
	current atomic.Pointer[Catalog]
	// builds holds the latest catalog source not yet built (1-buffered,
	// latest wins; only the servers manager sends).
	builds chan catalogSource

	// MaxFrame is the link frame cap (LNK-4); CallTimeout bounds each
	// proxied call (TMO-4); StartTimeout bounds server starts.
	MaxFrame     int
	CallTimeout  time.Duration
	StartTimeout time.Duration
	Log          zerolog.Logger
	// Skipped returns the config files and entries the last load skipped,
	// named in unknown-server errors and in detailed discovered_servers;
	// nil means none.
	Skipped func() []ConfigProblem
	// Store serves the memory and saved-tool methods; nil refuses them.
	Store Store
	// StoreFor is a principal's own store (bridge serve); nil gives
	// principals none.
	StoreFor func(principal string) Store
	// OnProxied, when set, is told of every tool call proxied to a
	// server (bridge serve's metrics). It must not block.
	OnProxied func(server string)
	// History, when set, reads the last n call records of principal from
	// the audit trail, oldest first (runtime.history); nil: the trail is
	// off.
	History func(principal string, n int) ([]json.RawMessage, error)
	// SignIns, when set, is the calling principal's own upstream sign-ins
	// (identity: principal servers under bridge serve), for
	// runtime.signins() and runtime.signout(); nil: there are none.
	SignIns SignIns
	// ApprovalTimeout bounds the wait for a human's approval
	// (MCP_BRIDGE_APPROVAL_TIMEOUT); <= 0 is DefaultApprovalTimeout.
	ApprovalTimeout time.Duration

	// grants holds each granted server's entry for the sandbox, built
	// once per tool list (grants.go).
	grants grantEntries
}

// ConfigProblem is a config file (Entry "") or entry that was skipped.
type ConfigProblem struct {
	File, Entry, Reason string
	// Disabled marks an entry turned off with "disabled": true: a choice,
	// not a fault, so no error asks to fix it.
	Disabled bool
	// Unapproved marks a server of a project file the user has not
	// approved: listed, never started. Reason says how to approve it.
	Unapproved bool
}

// maxKnownNames bounds the server names an unknown-server error lists.
const maxKnownNames = 20

func (r *Router) skipped() []ConfigProblem {
	if r.Skipped == nil {
		return nil
	}
	return r.Skipped()
}

// unknownServer is the message for a server name that is not configured. It
// names the fix: the nearest name, the known servers, and the config files
// or entries that were skipped (a broken file may be where it is defined).
func (r *Router) unknownServer(cat *Catalog, name string) string {
	msg := "Unknown MCP server: " + name
	names := cat.Names()
	sep := ". "
	if s := search.Suggest(name, names, 1); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean '%s'?", s[0])
		sep = " "
	}
	switch {
	case len(names) == 0:
		msg += sep + "No servers are configured."
	case len(names) > maxKnownNames:
		msg += fmt.Sprintf("%sKnown servers: %s and %d more (runtime.discovered_servers()).", sep, strings.Join(names[:maxKnownNames], ", "), len(names)-maxKnownNames)
	default:
		msg += sep + "Known servers: " + strings.Join(names, ", ") + "."
	}
	var parts []string
	for _, p := range r.skipped() {
		switch {
		case p.Disabled, p.Unapproved:
		case p.Entry != "":
			parts = append(parts, fmt.Sprintf("%s: server %q: %s", p.File, p.Entry, p.Reason))
		default:
			parts = append(parts, p.File+": "+p.Reason)
		}
	}
	if len(parts) > 0 {
		msg += " Skipped config: " + strings.Join(parts, "; ") + " (fix it, then call again; `bridge doctor` checks the config)."
	}
	return msg
}

// notLoaded is why a configured server named name is not in the catalog
// (disabled, or a project server not approved), as one line that names the
// fix; "" when no such entry exists (a typo).
func (r *Router) notLoaded(name string) string {
	for _, p := range r.skipped() {
		switch {
		case p.Entry != name:
		case p.Disabled:
			return fmt.Sprintf("server '%s' is disabled in %s (\"disabled\": true)", name, p.File)
		case p.Unapproved:
			return fmt.Sprintf("server '%s' comes from the project file %s and is %s", name, p.File, p.Reason)
		}
	}
	return ""
}

// notLoadedError is the link error for a configured server that is not in
// the catalog (see notLoaded), or nil when name is not such a server.
func (r *Router) notLoadedError(name string) error {
	if why := r.notLoaded(name); why != "" {
		return LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, why)
	}
	return nil
}

// catalogSource is what a catalog is built from. Its maps are the
// sender's copies: the router reads them on its own goroutine.
type catalogSource struct {
	specs   []ServerSpec
	clients map[string]*Client
	pairs   map[string]*identities // identity: principal servers only
	tools   map[string][]ToolInfo
	policy  *Policy
	// published are closed once this source, or a newer one, is the
	// current catalog.
	published []chan struct{}
}

// NewRouter returns a router with an empty catalog.
func NewRouter() *Router {
	r := &Router{builds: make(chan catalogSource, 1)}
	r.current.Store(buildCatalog(nil, nil, nil))
	return r
}

func (r *Router) String() string { return "router" }

// Serve builds and publishes catalogs until ctx ends.
func (r *Router) Serve(ctx context.Context) error {
	for {
		select {
		case src := <-r.builds:
			r.build(src)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// build publishes the catalog of src and tells its waiters, even when the
// build panics (they then read the catalog before it).
func (r *Router) build(src catalogSource) {
	defer func() {
		for _, c := range src.published {
			close(c)
		}
	}()
	c := buildCatalog(src.specs, src.clients, src.tools)
	for name, p := range src.pairs {
		if cs := c.byName[name]; cs != nil {
			cs.pairs = p
		}
	}
	c.policy = src.policy
	r.current.Store(c)
}

// publish hands src to the actor without blocking; a source still waiting
// is replaced, and its waiters wait for src instead. The returned channel
// is closed once src (or a newer source) is the current catalog.
func (r *Router) publish(src catalogSource) <-chan struct{} {
	published := make(chan struct{})
	src.published = append(src.published, published)
	for {
		select {
		case r.builds <- src:
			return published
		default:
		}
		select {
		case old := <-r.builds:
			src.published = append(src.published, old.published...)
		default:
		}
	}
}

// Snapshot returns the current catalog; it never waits.
func (r *Router) Snapshot() *Catalog { return r.current.Load() }

// Resolve maps a call's servers argument to the servers of cat it may use, each
// readied in parallel within the start timeout. An unknown name (a typo)
// fails the call before any code runs. A server that is disabled, not
// approved (a project file's) or fails to start does not: the code may
// never touch it. Its proxies come from its
// disk catalog when there is one, else it has none and every attribute
// raises the cause; notes says which servers these are, and why.
func (r *Router) Resolve(ctx context.Context, cat *Catalog, names []string) (servers []protocol.Server, notes []string, err error) {
	if len(names) == 0 {
		return nil, nil, nil
	}
	// Why each name without a catalog entry is not loaded: "" for a typo.
	why := make([]string, len(names))
	for i, n := range names {
		if cat.Server(n) != nil {
			continue
		}
		if why[i] = r.notLoaded(n); why[i] == "" {
			return nil, nil, errors.New(r.unknownServer(cat, n))
		}
	}
	// Each server's live tool list comes back with its start, so the
	// granted servers need no newer catalog snapshot.
	out := make([]protocol.Server, len(names))
	errs := make([]error, len(names))
	signIns := make([]bool, len(names)) // needs a sign-in its first use can do
	var wg sync.WaitGroup
	for i, n := range names {
		s := cat.Server(n)
		if s == nil {
			errs[i] = errors.New(why[i])
			// Its alias is computed beside the live servers', so it cannot
			// take the name of a granted server's proxy.
			aliases := alias.Servers(append(cat.Names(), n))
			out[i] = protocol.Server{Name: n, Alias: aliases[len(aliases)-1], Tools: []protocol.Tool{}, Error: errs[i].Error()}
			continue
		}
		ready := func() {
			// It builds the proxies from the server's tools under its own
			// recover: with several servers it runs on a goroutine no
			// other recover reaches.
			defer guard(r.Log, "the tools of server "+n, func(any) {
				errs[i] = fmt.Errorf("server '%s' could not be loaded: %w", n, errInternal)
				out[i] = protocol.Server{Name: n, Alias: s.Spec.Alias, Tools: []protocol.Tool{}, Error: errs[i].Error()}
			})
			c, release, err := s.clientFor(PrincipalFrom(ctx))
			var tools []ToolInfo
			if err == nil {
				tools, err = c.Ready(ctx)
				release()
			}
			if err == nil {
				out[i] = r.grants.server(s.Spec, s.Client, tools)
				return
			}
			errs[i] = fmt.Errorf("server '%s' %s", n, startFailure(n, err.Error()))
			out[i] = s.protocolServer() // the disk catalog's tools, if any
			out[i].Error = errs[i].Error()
			out[i].SignIn = asSignIn(err) != nil
			if out[i].SignIn && c != nil && c.spec.SignIn != nil {
				// Its first use signs in through the call (signin.go): the
				// tools do not simply raise.
				signIns[i] = true
			}
		}
		if len(names) == 1 { // the usual grant: no goroutine to wait for
			ready()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready()
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	for i, err := range errs {
		switch {
		case signIns[i]:
			notes = append(notes, fmt.Sprintf("server '%s' is not signed in yet: its first use asks you to sign in (a link to open), then goes on", names[i]))
		case err != nil:
			notes = append(notes, err.Error()+"; its tools raise MCPError")
		}
	}
	return out, notes, nil
}

// ServeSandbox implements RequestRouter: it answers method through the one
// table of box→host methods (methods.go).
func (r *Router) ServeSandbox(ctx context.Context, scope Scope, method string, params json.RawMessage) (any, error) {
	m := boxMethods[method]
	if m == nil {
		return nil, &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: fmt.Sprintf("Unknown method %q", method)}
	}
	ctx, span := innerSpan(ctx, scope.span, method, params)
	if scope.recorder == nil && !span.IsRecording() {
		return m(r, ctx, scope, params)
	}
	began := time.Now()
	res, err := m(r, ctx, scope, params)
	if scope.recorder != nil {
		scope.recorder.Inner(method, params, res, err, began, time.Since(began))
	}
	endInner(span, res, err)
	return res, err
}

// known returns a discovered server with its tools known, starting it when
// it has no catalog yet. A start failure shows its stderr and host details
// only when scope grants the server.
func (r *Router) known(ctx context.Context, cat *Catalog, scope Scope, name string) (*CatalogServer, error) {
	s := cat.Server(name)
	if s == nil {
		if err := r.notLoadedError(name); err != nil {
			return nil, err
		}
		return nil, LinkError(protocol.CodeNotFound, protocol.KindNotFound, r.unknownServer(cat, name))
	}
	if s.Known {
		return s, nil
	}
	// Waits for this server only, within its start timeout (plus a sign-in
	// through the call's client when the start needs one: signin.go).
	c, release, err := s.clientFor(scope.Principal)
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, err.Error())
	}
	defer release()
	tools, err := c.Ready(withInner(ctx, name, "", scope.human))
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, scopedError(scope, name, err))
	}
	ks := newCatalogServer(s.Spec, s.Client, tools, true)
	ks.pairs = s.pairs
	return ks, nil
}

// startFailure is a client's start error without the "Server 'x' " head
// its messages start with, so a note or warning can name the server its own
// way: "failed to start: exit status 3; last stderr: ..." or "did not
// answer initialize within 30s (MCP_BRIDGE_START_TIMEOUT)".
func startFailure(name, msg string) string {
	if rest, ok := strings.CutPrefix(msg, "Server '"+name+"' "); ok {
		return rest
	}
	return "failed to start: " + msg
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scopedError is err's message as the sandbox sees it: complete for a
// server the call grants (VAL-3), redacted otherwise.
func scopedError(scope Scope, server string, err error) string {
	if contains(scope.Servers, server) {
		return err.Error()
	}
	return RedactedError(err)
}
