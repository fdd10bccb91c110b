package httpd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/propagation"

	"github.com/bridge-mcp/bridge/actors"
)

// Config is what the handler serves and how it refuses.
type Config struct {
	// ListenHost is the host of --listen; an Origin naming it is allowed.
	ListenHost string
	// Tokens is the tokens file; nil means no authentication
	// (--insecure-no-auth, loopback only): every caller is Anonymous.
	Tokens *Reloaded[TokenSet]
	// AllowedOrigins are the --allowed-origin values, as origins
	// (scheme://host[:port]) or bare hosts.
	AllowedOrigins []string
	// MetricsPrincipals are the --metrics-principal values: the only
	// principals that may read /metrics. None: every principal may.
	MetricsPrincipals []string
	// MaxBody caps a request body (the frame cap + 64 KiB): a body above
	// it gets 413 before mcp-go reads any of it.
	MaxBody int64
	// BodyTimeout bounds reading one request body.
	BodyTimeout time.Duration
	// MCP is mcp-go's streamable HTTP handler.
	MCP http.Handler
	// Bindings binds MCP session ids to principals.
	Bindings *Bindings
	// Ready reports readiness (runtime and image ready); Drain refuses
	// new requests once the bridge stops, and /readyz then answers 503.
	Ready func() bool
	// Standby, when set, reports that this replica stands by for the
	// leader Lease (bridge serve --leader-elect): /readyz answers 503
	// "standby" and /mcp refuses every request.
	Standby func() bool
	Drain   *Drain
	Metrics *Metrics
	Log     zerolog.Logger
	// Callback returns the sign-in redirect endpoint of principals' own
	// upstream sign-ins (engine/oauth.Callbacks), looked up per request:
	// serve makes it once its listener has a port. nil, or a nil result:
	// there is none, and the path answers 404.
	Callback func() http.Handler
}

// Anonymous is the principal of every caller when authentication is off.
const Anonymous = "anonymous"

// Handler is the mux of bridge serve: /healthz and /readyz without auth,
// /metrics and /mcp with it, and a 404 for OAuth discovery, so a client
// that probes for OAuth falls back to the bearer token it was given. Every
// endpoint has the Origin and Host checks (guard).
func Handler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if cfg.standby() && !cfg.Drain.Draining() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "standby\n")
			return
		}
		if cfg.Drain.Draining() || !cfg.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "not ready\n")
			return
		}
		io.WriteString(w, "ok\n")
	})
	notFound := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found: this bridge takes a bearer token from its tokens file, not OAuth", http.StatusNotFound)
	}
	mux.HandleFunc("/.well-known/oauth-protected-resource", notFound)
	mux.HandleFunc("/.well-known/oauth-protected-resource/", notFound)
	mux.HandleFunc("/.well-known/oauth-authorization-server", notFound)
	mux.HandleFunc("/.well-known/oauth-authorization-server/", notFound)
	mux.Handle("/metrics", cfg.auth(cfg.metricsAuth(cfg.Metrics.Handler())))
	mux.Handle("/mcp", cfg.refuseStandby(cfg.Drain.wrap(cfg.auth(cfg.bind(cfg.body(traceParent(cfg.MCP)))))))
	// The sign-in callback skips the Origin check and auth (callback.go);
	// the DNS rebinding check still applies.
	guarded, signIn := cfg.guard(mux), cfg.hostCheck(cfg.callback())
	return cfg.count(cfg.deadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == CallbackPath {
			signIn.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})))
}

func (cfg Config) standby() bool { return cfg.Standby != nil && cfg.Standby() }

// refuseStandby answers every request 503 while this replica stands by:
// the Service routes to the leader, so only a client that reached the pod
// directly gets here.
func (cfg Config) refuseStandby(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cfg.standby() {
			next.ServeHTTP(w, r)
			return
		}
		closing(w)
		w.Header().Set("Retry-After", "1")
		writeRPCError(w, http.StatusServiceUnavailable, -32000,
			"this bridge replica is the standby: the leader serves MCP; reach the bridge through its Service, or retry once this replica leads")
	})
}

// deadline bounds reading every request before it is authenticated: a
// client that declares a body and never sends it, or sends it slowly, holds
// its connection for BodyTimeout at most. auth lifts it for a caller with
// a token (body sets its own for the body, and a response may stream for
// as long as its call runs). http.Server.ReadTimeout would cut large
// uploads and SSE streams instead.
func (cfg Config) deadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg.BodyTimeout > 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(cfg.BodyTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// closing makes a refusal's response the connection's last, and ends its
// reading at once: after the handler, net/http reads the rest of a declared
// body it did not consume (up to 256 KiB, even when the response says
// Connection: close), from a client that may never send it.
func closing(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// count counts every response by code class, but the health probes': a
// kubelet's every few seconds, and /readyz's 503 while starting or
// draining, would read as traffic and server errors.
func (cfg Config) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		cfg.Metrics.HTTP(sw.code())
	})
}

// origin refuses a browser request from a page the bridge does not trust:
// an absent Origin (every non-browser client) is allowed; a present one
// must be loopback, the listen host or an --allowed-origin.
func (cfg Config) origin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := r.Header.Get("Origin")
		if o == "" || cfg.originAllowed(o) {
			next.ServeHTTP(w, r)
			return
		}
		cfg.Log.Info().Str("remote", r.RemoteAddr).Msg("request refused: Origin not allowed")
		closing(w)
		http.Error(w, "forbidden: Origin not allowed; start bridge serve with --allowed-origin for this origin", http.StatusForbidden)
	})
}

func (cfg Config) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	if cfg.ListenHost != "" && strings.EqualFold(host, cfg.ListenHost) {
		return true
	}
	norm := strings.ToLower(u.Scheme + "://" + u.Host)
	for _, a := range cfg.AllowedOrigins {
		a = strings.ToLower(strings.TrimRight(a, "/"))
		if a == norm || a == host || a == strings.ToLower(u.Host) {
			return true
		}
	}
	return false
}

// auth authenticates the bearer token and puts its principal in the
// request context. A refusal names no token and logs none.
func (cfg Config) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cfg.Tokens == nil {
			next.ServeHTTP(w, r.WithContext(actors.WithPrincipal(r.Context(), Anonymous)))
			return
		}
		// The deadline of the unauthenticated read ends with a good token.
		authed := func(principal string) {
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
			next.ServeHTTP(w, r.WithContext(actors.WithPrincipal(r.Context(), principal)))
		}
		token, ok := bearer(r.Header.Get("Authorization"))
		principal := ""
		if ok {
			principal, ok = cfg.Tokens.Get().Lookup(token)
		}
		if !ok {
			challenge := `Bearer realm="bridge"`
			msg := "unauthorized: send Authorization: Bearer <token> with a token from the bridge's tokens file"
			if token != "" {
				challenge += `, error="invalid_token"`
				msg = "unauthorized: the bearer token is not in the bridge's tokens file"
			}
			w.Header().Set("WWW-Authenticate", challenge)
			cfg.Log.Info().Str("remote", r.RemoteAddr).Bool("tokenSent", token != "").Msg("request refused: unauthorized")
			closing(w)
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		authed(principal)
	})
}

// bearer is the token of an "Authorization: Bearer TOKEN" header.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// bind answers a request whose Mcp-Session-Id is unknown, or bound to
// another principal, with 404 and a JSON-RPC error that says what to do.
// Both cases get the same answer, so a principal cannot tell another's
// session id from a made-up one.
func (cfg Config) bind(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		if id == "" && (r.Method == http.MethodGet || r.Method == http.MethodDelete) {
			closing(w)
			// mcp-go would mint an id for a GET without one, bound to
			// nothing; the stream it opens belongs to a session.
			writeRPCError(w, http.StatusBadRequest, -32600,
				"missing Mcp-Session-Id: send initialize first and pass the session id it returns")
			return
		}
		if id != "" && !cfg.Bindings.Owns(actors.PrincipalFrom(r.Context()), id) {
			closing(w)
			writeRPCError(w, http.StatusNotFound, -32001,
				"unknown MCP session id (it ended, the bridge restarted, or it is not yours): send initialize without Mcp-Session-Id to start a new session")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// body reads a POST body within MaxBody and BodyTimeout before mcp-go sees
// it (mcp-go reads bodies without a limit). The read deadline is lifted
// once the body is in: a response may stream for as long as its call runs.
func (cfg Config) body(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		// A refusal closes the connection: net/http would otherwise try to
		// read the rest of the body before answering, from a client that
		// is stalled or still sending megabytes.
		refuse := func(status int, msg string) {
			closing(w)
			writeRPCError(w, status, -32600, msg)
		}
		tooLarge := fmt.Sprintf("request body over %d bytes (MCP_BRIDGE_MAX_FRAME_BYTES + 64 KiB); send less code", cfg.MaxBody)
		if r.ContentLength > cfg.MaxBody {
			refuse(http.StatusRequestEntityTooLarge, tooLarge)
			return
		}
		rc := http.NewResponseController(w)
		if cfg.BodyTimeout > 0 {
			_ = rc.SetReadDeadline(time.Now().Add(cfg.BodyTimeout))
		}
		data, err := io.ReadAll(io.LimitReader(r.Body, cfg.MaxBody+1))
		if err != nil {
			msg := "reading the request body failed"
			if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				msg = fmt.Sprintf("request body not received within %s", cfg.BodyTimeout)
			}
			refuse(http.StatusRequestTimeout, msg)
			return
		}
		if int64(len(data)) > cfg.MaxBody {
			refuse(http.StatusRequestEntityTooLarge, tooLarge)
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.ContentLength = int64(len(data))
		next.ServeHTTP(w, r)
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// writeRPCError writes a JSON-RPC error with no id and an HTTP status.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":%q}}`+"\n", code, msg)
}

// statusWriter records the status code; it passes Flush and Unwrap on, so
// SSE streams and ResponseController keep working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// traceParent puts the W3C trace context of the request's traceparent and
// tracestate headers in its context, the parent of a run_python call's
// span unless the call's own _meta names another.
func traceParent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") == "" {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}
