package oauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bridge-mcp/bridge/engine/config"
)

// MaxAttempts bounds the authorizations in a row without a request getting
// through, so a server that keeps asking for more scope cannot loop the
// user through the browser.
const MaxAttempts = 3

// maxReplay bounds a request body kept to resend after a sign-in.
const maxReplay = 64 << 20

// RequiredError is a server that needs a sign-in (or more scope) that this
// request cannot do itself. Its text names the command that fixes it.
type RequiredError struct {
	Server string
	Scope  string // the scope the server asked for; "" when it named none
	Reason string // why the request could not sign in itself
	// Principal, when set, is the bridge serve principal who must sign in
	// as themselves (identity: principal): no operator command can.
	Principal string
	// NoLinks says the principal's MCP client cannot open sign-in links.
	NoLinks bool
}

func (e *RequiredError) Error() string {
	if e.Principal != "" {
		return fmt.Sprintf("Server '%s' needs your own sign-in (principal %s)%s: %s", e.Server, e.Principal, e.Reason, e.Fix())
	}
	return fmt.Sprintf("Server '%s' needs sign-in%s: run: %s", e.Server, e.Reason, e.Fix())
}

// WithoutLinks is e as met by a person whose MCP client cannot open
// sign-in links (actors: a start failed in the background, and the call
// that uses the server has such a client).
func (e *RequiredError) WithoutLinks() error {
	c := *e
	c.NoLinks = true
	return &c
}

// Fix is the command that signs in, or for a principal's own sign-in what
// they do. Scopes come from the server, so only plain scope names are
// shown: the user may paste the line into a shell.
func (e *RequiredError) Fix() string {
	switch {
	case e.Principal != "" && e.NoLinks:
		return "this MCP client cannot open sign-in links; call again from one that declares URL-mode elicitation, and the link comes to you there"
	case e.Principal != "":
		return "call again, and open the sign-in link your MCP client shows"
	}
	fix := "bridge auth login " + e.Server
	var safe []string
	for _, s := range strings.Fields(e.Scope) {
		if plainScope(s) {
			safe = append(safe, s)
		}
	}
	if len(safe) > 0 {
		fix += " --scope '" + strings.Join(safe, " ") + "'"
	}
	return fix
}

func plainScope(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.:/@+-", r)) {
			return false
		}
	}
	return s != ""
}

// Transport is the round tripper of one http or sse server: it attaches
// the server's stored token to requests for the server's origin only,
// refreshes it when it expires, and answers a 401 or a 403
// insufficient_scope by signing in (when UI is set) and resending.
type Transport struct {
	Base   http.RoundTripper // nil: http.DefaultTransport
	Server string
	URL    *url.URL
	Config *config.OAuth
	Store  *Store
	// UI, when set, lets a request sign in through the browser; nil makes
	// such a request fail at once with a *RequiredError.
	UI *Interaction
	// Scope is added to every authorization (bridge auth login --scope).
	Scope string
	// Fresh ignores the stored token until this transport signs in
	// (bridge auth login).
	Fresh bool
	Now   func() time.Time // nil: time.Now

	mu       sync.Mutex // one sign-in at a time
	signedIn bool
	// streak counts sign-ins that got a token since one last satisfied the
	// server: at most MaxAttempts, so a server that keeps asking for scope
	// cannot loop the user through the browser, whichever requests meet its
	// challenges.
	streak int
	// Attempts counts authorizations this transport started.
	Attempts int
}

// New returns the transport of one configured http or sse server.
func New(server, rawURL string, cfg *config.OAuth, store *Store, ui *Interaction) (*Transport, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	return &Transport{Server: server, URL: u, Config: cfg, Store: store, UI: ui}, nil
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// principal is whose own sign-in this transport carries; "" for the
// shared identity.
func (t *Transport) principal() string {
	if t.UI == nil {
		return ""
	}
	return t.UI.Principal
}

func (t *Transport) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// aux is the client for discovery, registration and token requests: it
// never carries the bearer token, and does not follow redirects of token
// requests to another origin with a client secret.
func (t *Transport) aux() *http.Client {
	return &http.Client{Transport: t.base(), Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.Method != http.MethodGet || len(via) > 5 {
				return http.ErrUseLastResponse
			}
			return nil
		}}
}

// token is the stored token for this server, refreshed when expired; "" when
// there is none or Fresh hides it.
func (t *Transport) token(ctx context.Context) (*Record, error) {
	t.mu.Lock()
	hidden := t.Fresh && !t.signedIn
	t.mu.Unlock()
	if hidden || t.Store == nil {
		return nil, nil
	}
	rec, err := t.Store.Current(ctx, t.aux(), t.Server, canonical(t.URL), t.now)
	if err != nil || rec == nil || !rec.Valid(t.now()) || rec.Resource != canonical(t.URL) {
		return nil, err
	}
	return rec, nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A token is bound to its server's origin: a request anywhere else
	// (a redirect, an endpoint URL the server announced) goes out bare.
	if !sameOrigin(req.URL, t.URL) {
		return t.base().RoundTrip(req)
	}
	body, err := replayable(req)
	if err != nil {
		return nil, err
	}
	refreshed, signedIn := false, false
	// Each turn either signs in (at most MaxAttempts in a row), refreshes
	// once, or uses a token another request just got; the bound is a
	// backstop against a server that rejects every new token.
	for turn := 0; ; turn++ {
		if turn > 2*MaxAttempts+2 {
			return nil, &RequiredError{Server: t.Server, Scope: t.Scope, Reason: " (the server rejects every new token)", Principal: t.principal()}
		}
		rec, err := t.token(req.Context())
		if err != nil {
			return nil, err
		}
		out := req.Clone(req.Context())
		if body != nil {
			out.Body = body()
		}
		if rec != nil && (t.URL.Scheme == "https" || isLoopback(t.URL)) {
			out.Header.Set("Authorization", "Bearer "+rec.AccessToken)
		}
		resp, err := t.base().RoundTrip(out)
		if err != nil {
			return nil, err
		}
		ch := parseChallenge(resp.Header.Values("WWW-Authenticate"))
		stepUp := resp.StatusCode == http.StatusForbidden && ch.Error == "insufficient_scope"
		if resp.StatusCode != http.StatusUnauthorized && !stepUp {
			if signedIn {
				// The sign-in satisfied the server. Only this counts: a
				// request that needs no token (initialize, often) says
				// nothing about whether the server accepts ours.
				t.mu.Lock()
				t.streak = 0
				t.mu.Unlock()
			}
			return resp, nil
		}
		drain(resp)
		if resp.StatusCode == http.StatusUnauthorized && rec != nil && rec.RefreshToken != "" && !refreshed {
			// The server rejected a token that looked valid: refresh once.
			refreshed = true
			if r, err := t.Store.refresh(req.Context(), t.aux(), t.Server, canonical(t.URL), rec.AccessToken, t.now); err == nil && r != nil && r.AccessToken != rec.AccessToken {
				continue
			}
		}
		scope := ch.Scope
		if stepUp && rec != nil {
			scope = unionScopes(rec.Scope, ch.Scope)
		}
		if t.UI == nil || (t.UI.Can != nil && !t.UI.Can(req.Context())) {
			why := ""
			switch {
			case stepUp:
				why = " with more scope"
			case rec != nil:
				// bridge auth status still says signed in: say what changed.
				why = " again (it was signed in, and the server refused its token: revoked, or expired on its side)"
			}
			return nil, &RequiredError{Server: t.Server, Scope: unionScopes(scope, t.Scope), Reason: why, Principal: t.principal(),
				NoLinks: t.UI != nil && t.UI.NoLinks != nil && t.UI.NoLinks(req.Context())}
		}
		if err := t.signIn(req.Context(), ch, scope, rec); err != nil {
			return nil, err
		}
		signedIn = true
	}
}

// signIn runs one authorization unless another request finished one since
// seen was read, in which case its token is used.
func (t *Transport) signIn(ctx context.Context, ch challenge, scope string, seen *Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.signedIn && t.Store != nil {
		if cur, _ := t.Store.Load(t.Server, canonical(t.URL)); cur != nil && cur.Valid(t.now()) && (seen == nil || cur.AccessToken != seen.AccessToken) &&
			covers(cur.Scope, scope) {
			return nil
		}
	}
	if failed := failedBefore(ctx); failed != nil {
		// This probe's sign-in failed already: mcp-go's server/discover
		// and its initialize after it would otherwise each ask the person.
		return failed
	}
	if t.streak >= MaxAttempts {
		return &RequiredError{Server: t.Server, Scope: unionScopes(scope, t.Scope),
			Reason: fmt.Sprintf(" (the server still refused after %d sign-ins)", MaxAttempts), Principal: t.principal()}
	}
	t.streak++
	t.Attempts++
	// The sign-in outlives the deadline of the request that met the
	// challenge: mcp-go bounds some requests (its server/discover probe) by
	// a few seconds, far less than a user needs in the browser. The
	// Interaction's own timeout bounds the wait instead. A cancellation
	// (the bridge stopping, Ctrl-C) still ends it.
	parent := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	stop := context.AfterFunc(parent, func() {
		if errors.Is(parent.Err(), context.Canceled) {
			cancel()
		}
	})
	defer stop()
	s := &signIn{server: t.Server, url: t.URL, cfg: t.Config, store: t.Store, hc: t.aux(), ui: t.UI, ch: challenge{ResourceMetadata: ch.ResourceMetadata, Scope: scope},
		scope: t.Scope, now: t.now}
	if _, err := s.run(ctx); err != nil {
		if _, ok := AsRequired(err); !ok {
			err = &FailedError{Server: t.Server, Err: err}
		}
		noteFailure(parent, err)
		// A sign-in that got no token (declined, timed out, a refused
		// registration) did not loop the user through anything the server
		// asked for again; counting it would lock this server's sign-in
		// for the rest of a long bridge run after a few unanswered links.
		t.streak--
		return err
	}
	t.signedIn = true
	return nil
}

// FailedError is a sign-in that was started and did not end with a token:
// no answer in time, a refused registration or code exchange. Its text is
// the flow's own ("sign-in to github: …").
type FailedError struct {
	Server string
	Err    error
}

func (e *FailedError) Error() string { return e.Err.Error() }
func (e *FailedError) Unwrap() error { return e.Err }

// AsFailed finds the *FailedError in err's chain.
func AsFailed(err error) (*FailedError, bool) {
	var fe *FailedError
	ok := errors.As(err, &fe)
	return fe, ok
}

// oneSignInKey marks a context whose requests share one sign-in attempt
// (a Probe): after it fails, the next request fails the same way.
type oneSignInKey struct{}

type oneSignIn struct {
	mu  sync.Mutex
	err error
}

// OneSignIn returns ctx under which at most one sign-in is tried.
func OneSignIn(ctx context.Context) context.Context {
	return context.WithValue(ctx, oneSignInKey{}, &oneSignIn{})
}

func failedBefore(ctx context.Context) error {
	if o, ok := ctx.Value(oneSignInKey{}).(*oneSignIn); ok {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.err
	}
	return nil
}

func noteFailure(ctx context.Context, err error) {
	if o, ok := ctx.Value(oneSignInKey{}).(*oneSignIn); ok {
		o.mu.Lock()
		o.err = err
		o.mu.Unlock()
	}
}

// covers reports whether granted includes every scope of want.
func covers(granted, want string) bool {
	g := strings.Fields(granted)
	for _, w := range strings.Fields(want) {
		if !contains(g, w) {
			return false
		}
	}
	return true
}

// replayable makes req's body readable again for a resend: GetBody when
// the request has one, else the body read into memory (bounded).
func replayable(req *http.Request) (func() io.ReadCloser, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.GetBody != nil {
		first := true
		return func() io.ReadCloser {
			if first {
				first = false
				return req.Body
			}
			b, err := req.GetBody()
			if err != nil {
				return io.NopCloser(errReader{err})
			}
			return b
		}, nil
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, maxReplay+1))
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(data) > maxReplay {
		return nil, errors.New("request body too large to resend after sign-in")
	}
	return func() io.ReadCloser { return io.NopCloser(bytes.NewReader(data)) }, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func asRequired(err error, target **RequiredError) bool { return errors.As(err, target) }

// AsRequired finds the *RequiredError in err's chain.
func AsRequired(err error) (*RequiredError, bool) {
	var re *RequiredError
	ok := errors.As(err, &re)
	return re, ok
}

// Canonical is the server URL as tokens are keyed and bound.
func (t *Transport) Canonical() string { return canonical(t.URL) }
