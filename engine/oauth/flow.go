package oauth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-mcp/bridge/engine/config"
)

// Interaction is how a sign-in reaches the user: Out gets the URL (always
// printed), Open opens it (nil: the user opens it), and Paste, when set,
// supplies the redirect URL the browser landed on instead of a loopback
// listener (--no-browser). Timeout bounds the wait for the browser.
type Interaction struct {
	Out     io.Writer
	Open    func(url string) error
	Paste   io.Reader
	Timeout time.Duration
	// Can, when set, tells whether the request of ctx can reach a person
	// at all (bridge run: only a call whose MCP client takes sign-in
	// links); a request that cannot fails at once naming the fix.
	Can func(ctx context.Context) bool
	// Ask, when set, sends the URL to the person of the request's ctx
	// (URL-mode elicitation) instead of Open; false ends the sign-in.
	Ask func(ctx context.Context, url string) bool
	// Callbacks, when set, is bridge serve's redirect endpoint: the
	// browser comes back to it rather than to a loopback listener, and
	// Principal is whose sign-in this is (the state binds the code to it).
	Callbacks *Callbacks
	Principal string
	// NoLinks, when set, tells whether the request of ctx comes from a
	// person whose client cannot take a sign-in link (rather than from
	// no person at all, like a start in the background): the error then
	// says so.
	NoLinks func(ctx context.Context) bool
}

// DefaultTimeout is how long a sign-in waits for the browser.
const DefaultTimeout = 5 * time.Minute

// signIn is one authorization: discovery, registration, the browser round
// trip and the code exchange. It saves and returns the new record.
type signIn struct {
	server   string
	url      *url.URL // the MCP server
	cfg      *config.OAuth
	store    *Store
	hc       *http.Client // for metadata, registration and token requests
	ui       *Interaction
	ch       challenge
	scope    string // from the caller: --scope, or a step-up's union
	now      func() time.Time
	clientID string // what the authorization request used, for tests
}

func (s *signIn) run(ctx context.Context) (*Record, error) {
	if _, err := secureURL("server url", s.url.String()); err != nil {
		return nil, fmt.Errorf("sign-in to %s: %w: a token is never sent over plain http beyond this machine", s.server, err)
	}
	rm, err := discoverResource(ctx, s.hc, s.url, s.ch)
	if err != nil {
		return nil, err
	}
	issuer := origin(s.url)
	indicator := canonical(s.url)
	if rm != nil {
		if len(rm.AuthorizationServers) == 0 {
			return nil, errors.New("protected resource metadata names no authorization server")
		}
		issuer = rm.AuthorizationServers[0]
		if rm.Resource != "" {
			indicator = rm.Resource
		}
	}
	as, err := discoverServer(ctx, s.hc, issuer, rm == nil)
	if err != nil {
		return nil, err
	}
	scope := s.selectScope(rm)

	state := randomString(24)
	redirect, codes, stop, err := s.listen(state)
	if err != nil {
		return nil, err
	}
	var end outcome // what the callback page reports
	defer func() { stop(end) }()
	prev, _ := s.store.Load(s.server, canonical(s.url))
	rec, err := s.register(ctx, as, redirect, prev)
	if err != nil {
		return nil, err
	}
	rec.Indicator = indicator

	verifier := randomString(32)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {rec.ClientID},
		"redirect_uri":          {redirect},
		"state":                 {state},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"resource":              {indicator},
	}
	if scope != "" {
		q.Set("scope", scope)
	}
	s.clientID = rec.ClientID
	authURL := as.AuthorizationEndpoint
	if strings.Contains(authURL, "?") {
		authURL += "&" + q.Encode()
	} else {
		authURL += "?" + q.Encode()
	}
	code, err := s.await(ctx, authURL, state, codes)
	if err != nil {
		end.err = err
		return nil, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"code_verifier": {verifier}, "resource": {indicator}}
	tr, err := tokenRequest(ctx, s.hc, rec, form)
	if err != nil {
		end.err = err
		return nil, err
	}
	tr.apply(rec, scope, s.now())
	rec.Server, rec.Resource = s.server, canonical(s.url)
	if err := s.store.Save(rec); err != nil {
		end.err = errors.New("the token could not be stored")
		return nil, err
	}
	end.account = rec.Account
	return rec, nil
}

// selectScope follows the MCP scope selection strategy: the challenge's
// scope, then the configured scopes, then the resource's scopes_supported,
// else none. The caller's scope (a step-up or --scope) is added.
func (s *signIn) selectScope(rm *resourceMeta) string {
	var base []string
	switch {
	case s.ch.Scope != "":
		base = strings.Fields(s.ch.Scope)
	case s.cfg != nil && len(s.cfg.Scopes) > 0:
		base = s.cfg.Scopes
	case rm != nil && len(rm.ScopesSupported) > 0:
		base = rm.ScopesSupported
	}
	return unionScopes(strings.Join(base, " "), s.scope)
}

// unionScopes joins two space-separated scope lists without duplicates.
func unionScopes(a, b string) string {
	var out []string
	for _, s := range append(strings.Fields(a), strings.Fields(b)...) {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// canonical is the server URL as the token's binding: lower-case scheme and
// host, no fragment or query.
func canonical(u *url.URL) string {
	c := *u
	c.Scheme, c.Host = strings.ToLower(c.Scheme), strings.ToLower(c.Host)
	c.Fragment, c.RawFragment, c.RawQuery = "", "", ""
	return c.String()
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// register picks the client identity, in this order: the entry's
// pre-registered client, its Client ID Metadata Document URL when the
// authorization server supports those, a client this bridge registered
// before for the same issuer and redirect, then dynamic registration.
func (s *signIn) register(ctx context.Context, as *serverMeta, redirect string, prev *Record) (*Record, error) {
	rec := &Record{Issuer: as.Issuer, TokenEndpoint: as.TokenEndpoint, RedirectURI: redirect}
	methods := as.TokenEndpointAuthMethodsSupported
	switch {
	case s.cfg != nil && s.cfg.ClientID != "":
		rec.ClientID, rec.ClientSecret = s.cfg.ClientID, s.cfg.ClientSecret
		rec.AuthMethod = chooseMethod(methods, rec.ClientSecret != "")
		return rec, nil
	case s.cfg != nil && s.cfg.ClientMetadataURL != "" && as.ClientIDMetadataDocumentSupported:
		rec.ClientID, rec.AuthMethod = s.cfg.ClientMetadataURL, "none"
		return rec, nil
	case prev != nil && prev.Registered && prev.Issuer == as.Issuer && prev.RedirectURI == redirect && prev.ClientID != "":
		rec.ClientID, rec.ClientSecret, rec.AuthMethod, rec.Registered = prev.ClientID, prev.ClientSecret, prev.AuthMethod, true
		return rec, nil
	case as.RegistrationEndpoint == "":
		return nil, fmt.Errorf("the authorization server of %s offers no dynamic client registration: add \"oauth\": {\"clientId\": …} (or \"clientMetadataUrl\") to the server's entry", s.server)
	}
	want := "none"
	if len(methods) > 0 && !contains(methods, "none") {
		want = chooseMethod(methods, true)
	}
	body, _ := json.Marshal(map[string]any{
		"client_name":                "bridge",
		"redirect_uris":              []string{redirect},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": want,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("client registration: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client registration: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxMeta))
	var reg struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
		Error        string `json:"error"`
		ErrorDesc    string `json:"error_description"`
	}
	_ = json.Unmarshal(data, &reg)
	if resp.StatusCode/100 != 2 || reg.ClientID == "" {
		return nil, fmt.Errorf("client registration: the authorization server answered HTTP %d %s %s", resp.StatusCode, oneLine(reg.Error), oneLine(reg.ErrorDesc))
	}
	rec.ClientID, rec.ClientSecret, rec.Registered = reg.ClientID, reg.ClientSecret, true
	rec.AuthMethod = reg.AuthMethod
	if rec.AuthMethod == "" {
		rec.AuthMethod = chooseMethod(methods, rec.ClientSecret != "")
	}
	return rec, nil
}

// chooseMethod picks the token endpoint authentication method: with a
// secret, basic then post as the server supports them (basic when it does
// not say, RFC 8414's default); without one, none.
func chooseMethod(supported []string, secret bool) string {
	if !secret {
		return "none"
	}
	for _, m := range []string{"client_secret_basic", "client_secret_post"} {
		if len(supported) == 0 || contains(supported, m) {
			return m
		}
	}
	if contains(supported, "none") {
		return "none"
	}
	return "client_secret_basic"
}

// callback is what the loopback redirect delivered.
type callback struct {
	code, state, err string
}

// listen starts the loopback redirect listener on 127.0.0.1 (the
// configured port, or any free one). With Paste set it only reserves the
// redirect URI's port. With Callbacks set (bridge serve) it registers
// state there instead, for the interaction's timeout. stop shuts the
// listener and waits for it, or reports the sign-in's outcome to the
// callback page.
func (s *signIn) listen(state string) (redirect string, codes <-chan callback, stop func(outcome), err error) {
	if cb := s.ui.Callbacks; cb != nil {
		codes, done := cb.open(state, s.ui.Principal, s.server, s.timeout())
		return cb.RedirectURI, codes, done, nil
	}
	port := 0
	if s.cfg != nil && s.cfg.CallbackPort != 0 {
		port = s.cfg.CallbackPort
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", nil, nil, fmt.Errorf("sign-in callback: cannot listen on 127.0.0.1:%d: %w (oauth.callbackPort)", port, err)
	}
	redirect = fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port)
	ch := make(chan callback, 1)
	if s.ui.Paste != nil {
		ln.Close()
		return redirect, ch, func(outcome) {}, nil
	}
	var once sync.Once
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		delivered := false
		once.Do(func() {
			ch <- callback{code: q.Get("code"), state: q.Get("state"), err: q.Get("error")}
			delivered = true
		})
		if !delivered {
			http.Error(w, "this sign-in link was already used", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "bridge: sign-in received; you can close this tab.")
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return redirect, ch, func(outcome) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// await shows the authorization URL and waits for the redirect: from the
// loopback listener, or the URL the user pastes. The state is compared in
// constant time and used once.
func (s *signIn) await(ctx context.Context, authURL, state string, codes <-chan callback) (string, error) {
	fmt.Fprintf(s.ui.Out, "bridge: sign in to %s by opening this URL in a browser:\n  %s\n", s.server, authURL)
	if s.ui.Paste != nil {
		fmt.Fprintf(s.ui.Out, "bridge: then paste here the URL the browser was sent to (it starts with http://127.0.0.1):\n")
	} else if s.ui.Ask != nil {
		if !s.ui.Ask(ctx, authURL) {
			return "", &RequiredError{Server: s.server, Scope: s.scope, Reason: " (the sign-in link was not accepted)", Principal: s.ui.Principal}
		}
	} else if s.ui.Open != nil {
		if err := s.ui.Open(authURL); err != nil {
			fmt.Fprintf(s.ui.Out, "bridge: could not open a browser (%v); open the URL yourself\n", err)
		}
	}
	timeout := s.timeout()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cb callback
	if s.ui.Paste != nil {
		line, err := readLine(ctx, s.ui.Paste, timer.C)
		if err != nil {
			return "", fmt.Errorf("sign-in to %s: %w", s.server, err)
		}
		u, perr := url.Parse(strings.TrimSpace(line))
		if perr != nil {
			return "", fmt.Errorf("sign-in to %s: the pasted text is not a URL", s.server)
		}
		q := u.Query()
		cb = callback{code: q.Get("code"), state: q.Get("state"), err: q.Get("error")}
	} else {
		select {
		case cb = <-codes:
		case <-ctx.Done():
			return "", fmt.Errorf("sign-in to %s: %w", s.server, ctx.Err())
		case <-timer.C:
			limit := "the sign-in timeout, --timeout"
			if s.ui.Callbacks != nil {
				limit = "MCP_BRIDGE_APPROVAL_TIMEOUT"
			}
			return "", fmt.Errorf("sign-in to %s: no answer from the browser within %s (%s)", s.server, timeout, limit)
		}
	}
	if subtle.ConstantTimeCompare([]byte(cb.state), []byte(state)) != 1 {
		return "", fmt.Errorf("sign-in to %s: the redirect carries the wrong state; start the sign-in again", s.server)
	}
	if cb.err != "" {
		return "", fmt.Errorf("sign-in to %s: the authorization server answered %s", s.server, oneLine(cb.err))
	}
	if cb.code == "" {
		return "", fmt.Errorf("sign-in to %s: the redirect carries no code", s.server)
	}
	return cb.code, nil
}

// timeout bounds the wait for the browser.
func (s *signIn) timeout() time.Duration {
	if s.ui.Timeout > 0 {
		return s.ui.Timeout
	}
	return DefaultTimeout
}

// readLine reads one line from r, or fails on ctx or the timer. The reader
// goroutine ends when r yields a line or closes.
func readLine(ctx context.Context, r io.Reader, timer <-chan time.Time) (string, error) {
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if strings.TrimSpace(line) == "" {
			return "", errors.New("no redirect URL was pasted")
		}
		return line, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-timer:
		return "", errors.New("no redirect URL pasted within the sign-in timeout (--timeout)")
	}
}
