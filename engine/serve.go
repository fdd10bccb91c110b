package engine

// serve.go is bridge serve: the same actors as bridge run, with mcp-go's
// streamable HTTP server in front of them instead of stdio, behind the
// middleware of engine/httpd (authentication, Origin, body cap, session
// binding). Each call runs as its principal: its sessions, store and
// policy grants are its own.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/httpd"
)

// HTTPOptions are bridge serve's flags.
type HTTPOptions struct {
	Listen         string // host:port
	TLSCert        string // with TLSKey: serve HTTPS, re-reading both on change
	TLSKey         string
	DrainTimeout   time.Duration // how long SIGTERM waits for calls before interrupting them
	AllowedOrigins []string
	InsecureNoAuth bool // no tokens file: loopback only
	// MetricsPrincipals may read /metrics, and no other principal; none:
	// every principal may.
	MetricsPrincipals []string
	// LeaderElect stands by until this replica holds the leader Lease
	// (leader.go); the kubernetes runtime only.
	LeaderElect bool
	// PublicURL is the bridge's external base URL, where browsers come back
	// after a principal's own sign-in (/oauth/callback); "": the listen
	// address.
	PublicURL string
}

// DefaultDrainTimeout is --drain-timeout's default: under Kubernetes'
// default 30 s grace period, with room for the interrupt.
const DefaultDrainTimeout = 25 * time.Second

// Timeouts of the HTTP server. There is no WriteTimeout: it would cut the
// SSE stream of a call that runs longer, and every call is bounded by its
// own timeout instead.
const (
	readHeaderTimeout = 10 * time.Second
	bodyTimeout       = 30 * time.Second
	idleConnTimeout   = 2 * time.Minute
	// mcpSessionTTL ends the transport state of an MCP session whose
	// client vanished without a DELETE; the bridge's own sessions end on
	// MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT as always.
	mcpSessionTTL = 30 * time.Minute
	// interruptBound is how long the calls interrupted after the drain
	// timeout get to deliver their results before connections are closed.
	interruptBound = 15 * time.Second
	reloadEvery    = time.Second
)

// CheckListen validates the listen address against the auth mode; the
// error is one line naming the fix.
func CheckListen(opts HTTPOptions, tokensFile string) error {
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return fmt.Errorf("serve: --listen %q: want HOST:PORT, e.g. 127.0.0.1:8080", opts.Listen)
	}
	for _, p := range opts.MetricsPrincipals {
		if !httpd.ValidPrincipal(p) {
			return fmt.Errorf("serve: --metrics-principal %q: a principal is 1-64 characters from A-Z a-z 0-9 _ . - (not . or ..)", p)
		}
	}
	switch {
	case tokensFile != "" && opts.InsecureNoAuth:
		return errors.New("serve: --insecure-no-auth and MCP_BRIDGE_TOKENS_FILE are both set; choose one")
	case tokensFile == "" && !opts.InsecureNoAuth:
		return errors.New("serve: MCP_BRIDGE_TOKENS_FILE is not set: give a tokens file (one \"principal token\" per line), " +
			"or --insecure-no-auth on a loopback --listen address")
	case opts.InsecureNoAuth && !isLoopback(host):
		return fmt.Errorf("serve: --insecure-no-auth is allowed only on a loopback address (127.0.0.1, ::1, localhost), not %q", host)
	case (opts.TLSCert == "") != (opts.TLSKey == ""):
		return errors.New("serve: --tls-cert and --tls-key go together; give both or neither")
	}
	return nil
}

// unknownMetricsPrincipals are the --metrics-principal values no caller
// has yet: not in the tokens file, or not "anonymous" without one.
func unknownMetricsPrincipals(want []string, tokens *httpd.Reloaded[httpd.TokenSet]) []string {
	have := []string{httpd.Anonymous}
	if tokens != nil {
		have = tokens.Get().Principals()
	}
	var out []string
	for _, p := range want {
		if !slices.Contains(have, p) {
			out = append(out, p)
		}
	}
	return out
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServeHTTP serves MCP over streamable HTTP at /mcp until ctx ends, then
// drains: /readyz answers 503, the listener closes, in-flight calls get up
// to DrainTimeout to finish, the rest are interrupted (each still gets its
// result), and every actor, container and child is stopped.
func (e *Engine) ServeHTTP(ctx context.Context, opts HTTPOptions) error {
	if err := CheckListen(opts, e.Env.TokensFile); err != nil {
		return err
	}
	defer e.traces.shutdown() // last: after the drain and the actors' stop
	hlog := e.Log.With().Str("actor", "http").Logger()
	var tokens *httpd.Reloaded[httpd.TokenSet]
	if e.Env.TokensFile != "" {
		var err error
		if tokens, err = loadTokens(e.Env.TokensFile, hlog); err != nil {
			return err
		}
		e.tokens.Store(tokens) // redacted wherever a record or span would hold one
	}
	for _, p := range unknownMetricsPrincipals(opts.MetricsPrincipals, tokens) {
		hlog.Warn().Str("principal", p).Msg("--metrics-principal names a principal the tokens file does not list: /metrics refuses it until the file does")
	}
	var cert *httpd.Reloaded[tlsCertificate]
	if opts.TLSCert != "" {
		var err error
		if cert, err = httpd.NewCertificate(opts.TLSCert, opts.TLSKey, hlog); err != nil {
			return err
		}
	}
	metrics := httpd.NewMetrics()
	var lead *leadership
	if opts.LeaderElect {
		var err error
		if lead, err = e.startLeadership(metrics, hlog); err != nil {
			return err
		}
		// Last, after the actors stopped: a graceful stop releases the
		// Lease once this replica's snapshots are written.
		defer lead.stop()
	}
	e.router.StoreFor = e.principalStores()
	e.router.SignIns = principalSignIns{e}
	e.MigrateTokens()
	e.router.OnProxied = metrics.Proxied
	e.sessions.PerPrincipal = e.Env.MaxSessionsPerPrincipal
	// Principals share the bridge by their young calls in flight from half
	// a call per core on: each call keeps the bridge and its sandbox busy in
	// turn (engine/callgate.go).
	gate := newCallGate(e.Env.MaxCallsPerPrincipal, runtime.GOMAXPROCS(0)/2)

	fcfg := e.frontConfig(hlog)
	fcfg.Render = e.Render // httpRun adds the limits warning per (principal, session)
	var interrupted atomic.Bool
	fcfg.Run = e.httpRun(gate, metrics, &interrupted)
	front := actors.NewFront(fcfg)
	bindings := httpd.NewBindings()
	mcpHTTP := server.NewStreamableHTTPServer(front.Server(),
		server.WithSessionIdManagerResolver(bindings.Resolver()),
		server.WithStreamableHTTPLogger(slog.Default()),
		server.WithSessionIdleTTL(mcpSessionTTL),
	)
	drain := &httpd.Drain{}
	ready := newReadiness(e)
	host, _, _ := net.SplitHostPort(opts.Listen)
	handler := httpd.Handler(httpd.Config{
		ListenHost: host, Tokens: tokens, AllowedOrigins: opts.AllowedOrigins, MetricsPrincipals: opts.MetricsPrincipals,
		MaxBody: int64(e.Env.MaxFrameBytes) + 64<<10, BodyTimeout: bodyTimeout,
		MCP: mcpHTTP, Bindings: bindings, Metrics: metrics, Log: hlog,
		Ready: ready.ok, Standby: lead.isStandby, Drain: drain, Callback: e.callback,
	})
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("serve: listen: %w", err)
	}
	if tokens != nil {
		e.openCallbacks(opts, ln.Addr().String())
	}
	ln = httpd.LimitPerAddr(ln, e.Env.MaxConnsPerAddr, hlog)
	srv := &http.Server{
		Handler: handler, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleConnTimeout,
		ErrorLog: log.New(httpErrorLog{hlog}, "", 0),
	}
	if cert != nil {
		srv.TLSConfig = httpd.TLSConfig(cert)
	}

	// The tokens and the certificate are reloaded also while standing by:
	// /metrics answers there too.
	rctx, stopReload := context.WithCancel(context.Background())
	defer stopReload()
	var wg sync.WaitGroup
	if tokens != nil {
		goOwned(&wg, func() { tokens.Run(rctx, reloadEvery) })
	}
	if cert != nil {
		goOwned(&wg, func() { cert.Run(rctx, reloadEvery) })
	}
	served := make(chan error, 1)
	go func() {
		if cert != nil {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	scheme := "http"
	if cert != nil {
		scheme = "https"
	}
	e.Log.Info().Str("version", e.Version).Str("url", scheme+"://"+ln.Addr().String()+"/mcp").
		Bool("auth", tokens != nil).Str("runtime", e.Env.Runtime).Str("image", e.Env.Image).Msg("bridge serving")

	// The actors run on their own context, started once this replica
	// leads: a signal starts the drain, and only the drain's end (or its
	// timeout) stops them.
	actx, stopActors := context.WithCancel(context.Background())
	defer stopActors()
	rootDone := make(chan struct{})
	var fenced chan struct{} // closed once a leader lost the Lease; nil without election
	leading := lead.awaitLead(ctx, served, hlog)
	if leading {
		wg.Add(1)
		go e.logEvents(actx, &wg)
		go func() {
			defer close(rootDone)
			if err := e.root(nil).Serve(actx); err != nil && !errors.Is(err, context.Canceled) {
				e.Log.Error().Err(err).Msg("actors stopped")
			}
		}()
		goOwned(&wg, func() { ready.run(actx) })
		goOwned(&wg, func() { sessionGauges(actx, e.sessions, tokens, metrics) })
		if lead != nil {
			lead.standby.Store(false)
			metrics.Leader(true)
			// Fenced at once, whatever serve is doing then (a drain too).
			fenced = make(chan struct{})
			goOwned(&wg, func() {
				select {
				case <-lead.Lost():
					e.fence(drain, metrics)
					close(fenced)
				case <-rctx.Done():
				}
			})
		}
	} else {
		close(rootDone)
	}

	var serveErr error
	drainFor := opts.DrainTimeout
	if leading {
		select {
		case <-ctx.Done():
		case serveErr = <-served:
			served <- serveErr
		case <-fenced:
			drainFor = 0 // the calls in flight cannot keep their state: interrupt them now
			serveErr = errLostLease
		}
	}
	e.drain(drain, srv, mcpHTTP, drainFor, func() { interrupted.Store(true); stopActors() }, hlog)
	front.Close() // the calls held for a 2026-07-28 client's retry
	if err := <-served; !errors.Is(err, http.ErrServerClosed) && serveErr == nil {
		serveErr = err
	}
	stopActors()
	<-rootDone
	stopReload()
	wg.Wait()
	if errors.Is(serveErr, errLostLease) {
		return serveErr
	}
	e.Log.Info().Msg("bridge stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}

// drain refuses new requests (503, and /readyz 503), waits up to timeout
// for the requests in flight, then interrupts the calls still running
// (stopping the actors ends each with a result) and waits for those
// results to be written, before it closes the server.
func (e *Engine) drain(d *httpd.Drain, srv *http.Server, mcpHTTP *server.StreamableHTTPServer, timeout time.Duration, interrupt func(), log zerolog.Logger) {
	d.Start()
	log.Info().Dur("drainTimeout_ms", timeout).Int("inFlight", d.InFlight()).Msg("draining: refusing new requests; waiting for calls in flight")
	// The standalone SSE streams (GET) never end on their own.
	_ = mcpHTTP.Shutdown(context.Background())
	dctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := d.Wait(dctx)
	cancel()
	if err != nil {
		log.Warn().Int("inFlight", d.InFlight()).Msg("drain timeout reached; interrupting the calls still running")
		interrupt()
		ictx, cancel := context.WithTimeout(context.Background(), interruptBound)
		if err := d.Wait(ictx); err != nil {
			log.Error().Int("inFlight", d.InFlight()).Msg("requests still in flight after the interrupt")
		}
		cancel()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
}

func goOwned(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		f()
	}()
}

// httpErrorLog sends net/http's own errors (TLS handshakes, bad requests)
// to the debug log: they are the client's, and one per bad connection.
type httpErrorLog struct{ log zerolog.Logger }

func (w httpErrorLog) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
