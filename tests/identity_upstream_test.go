package tests

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// identityUpstream is an upstream MCP server (streamable HTTP, single JSON
// responses) with its own multi-user OAuth 2.1 authorization server on the
// same origin, for end-to-end tests of per-user upstream identity:
//
//	/.well-known/oauth-protected-resource/mcp  protected resource metadata (RFC 9728)
//	/.well-known/oauth-authorization-server    authorization server metadata (RFC 8414)
//	/register                                  dynamic client registration (RFC 7591)
//	/authorize                                 authorization code + PKCE S256, RFC 8707 resource
//	/token                                     authorization_code and refresh_token grants
//	/mcp                                       the MCP endpoint; every request needs a bearer token
//
// The "browser" says who is signed in at the upstream with the header
// X-Test-User on its GET to /authorize (standing in for a session cookie);
// the authorization server approves at once for that user.
//
// Invariants: every token, code and client is random and opaque; a code
// is used at most once, within 60 s, by the client, redirect_uri and PKCE
// verifier it was issued for; an access or refresh token belongs to
// exactly one user and one client; a refresh rotates the refresh token; a
// tools/call is answered as the user of its bearer token and nobody else.
// All state is under mu.
type identityUpstream struct {
	URL string // the MCP endpoint, srv.URL + "/mcp"

	srv *httptest.Server

	mu             sync.Mutex
	clients        map[string]*iduClient // by client_id
	codes          map[string]*iduCode   // by code; removed on first use
	access         map[string]*iduToken  // by access token
	refresh        map[string]*iduToken  // by refresh token
	authorizations map[string]int        // codes issued, by user
	tokens         map[string]int        // access tokens issued, by user
	registrations  int                   // DCR registrations
	issued         []string              // every access and refresh token issued, in order
	seen           []string              // the user of each tools/call, in order
}

// iduClient is a registered client. method is its token endpoint
// authentication: "none" (secret empty), "client_secret_post" or
// "client_secret_basic".
type iduClient struct {
	id, secret, method string
	redirects          []string
}

// iduCode is an issued authorization code and what it is bound to.
type iduCode struct {
	clientID, redirect, challenge, user, scope string
	expires                                    time.Time
}

// iduToken is an issued access or refresh token and what it is bound to;
// expires is zero for a refresh token (it lasts until used or revoked).
type iduToken struct {
	user, clientID, scope string
	expires               time.Time
}

const (
	iduCodeLife   = 60 * time.Second
	iduAccessLife = 3600 // seconds
	iduMaxBody    = 1 << 20
	iduMaxPage    = 64 << 10 // what Browse reads of a response body
	iduUserHeader = "X-Test-User"
)

// newIdentityUpstream starts the server; it closes with the test.
func newIdentityUpstream(t *testing.T) *identityUpstream {
	t.Helper()
	u := &identityUpstream{
		clients: map[string]*iduClient{}, codes: map[string]*iduCode{},
		access: map[string]*iduToken{}, refresh: map[string]*iduToken{},
		authorizations: map[string]int{}, tokens: map[string]int{},
	}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serveHTTP))
	t.Cleanup(u.srv.Close)
	u.URL = u.srv.URL + "/mcp"
	return u
}

// Browse plays a browser signed in at the upstream as user: it GETs authURL
// (the authorization endpoint URL the bridge sent, with its query) with
// X-Test-User: user (none when user is empty), where the authorization
// server approves at once and redirects (302) to the client's redirect_uri
// with code and state; Browse then follows that redirect with a plain GET
// (no auth header, a fresh client that skips TLS verification since the
// bridge's callback may be https with a test certificate) and returns the
// status code and body of the callback's response. When the authorization
// endpoint does not redirect, it returns that response's status and body
// and an error. Bodies are capped at 64 KiB.
func (u *identityUpstream) Browse(authURL, user string) (int, string, error) {
	// fresh is a client of its own, no redirects followed, no idle
	// connections left behind.
	fresh := func() *http.Client {
		return &http.Client{
			Timeout: 60 * time.Second, // the bridge's callback page waits up to 20 s for the exchange
			Transport: &http.Transport{
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the bridge's callback uses a test certificate
				DisableKeepAlives: true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	get := func(target string, header http.Header) (*http.Response, string, error) {
		req, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			return nil, "", err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := fresh().Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, iduMaxPage))
		return resp, string(body), err
	}
	h := http.Header{}
	if user != "" {
		h.Set(iduUserHeader, user)
	}
	resp, body, err := get(authURL, h)
	if err != nil {
		return 0, "", fmt.Errorf("authorization request: %w", err)
	}
	if resp.StatusCode != http.StatusFound {
		return resp.StatusCode, body, fmt.Errorf("authorization endpoint answered %d, not a redirect: %s", resp.StatusCode, strings.TrimSpace(body))
	}
	next, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	if err != nil {
		return 0, "", fmt.Errorf("authorization redirect: %w", err)
	}
	resp, body, err = get(next.String(), nil)
	if err != nil {
		return 0, "", fmt.Errorf("callback request: %w", err)
	}
	return resp.StatusCode, body, nil
}

// Authorizations counts the authorization codes issued for user.
func (u *identityUpstream) Authorizations(user string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.authorizations[user]
}

// Tokens counts the access tokens issued for user (code and refresh grants).
func (u *identityUpstream) Tokens(user string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tokens[user]
}

// IssuedTokens returns every access and refresh token issued so far,
// revoked and rotated ones included (for checks that none leaked).
func (u *identityUpstream) IssuedTokens() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.issued)
}

// Registrations counts dynamic client registrations.
func (u *identityUpstream) Registrations() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.registrations
}

// Seen returns, in order, the user each tools/call was made as (every
// authenticated tools/call, whichever tool it names).
func (u *identityUpstream) Seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// Revoke invalidates user's access and refresh tokens: the next MCP
// request with one gets 401, and a refresh gets invalid_grant.
func (u *identityUpstream) Revoke(user string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range []map[string]*iduToken{u.access, u.refresh} {
		for k, tok := range m {
			if tok.user == user {
				delete(m, k)
			}
		}
	}
}

// ExpireAccess invalidates user's access tokens but keeps the refresh
// tokens, as if the access tokens had expired: the client must refresh.
func (u *identityUpstream) ExpireAccess(user string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, tok := range u.access {
		if tok.user == user {
			delete(u.access, k)
		}
	}
}

func (u *identityUpstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-protected-resource/mcp":
		iduJSON(w, http.StatusOK, map[string]any{
			"resource": u.URL, "authorization_servers": []string{u.srv.URL}, "scopes_supported": []string{"read"},
			"bearer_methods_supported": []string{"header"},
		})
	case "/.well-known/oauth-authorization-server":
		iduJSON(w, http.StatusOK, map[string]any{
			"issuer":                                u.srv.URL,
			"authorization_endpoint":                u.srv.URL + "/authorize",
			"token_endpoint":                        u.srv.URL + "/token",
			"registration_endpoint":                 u.srv.URL + "/register",
			"scopes_supported":                      []string{"read"},
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_post", "client_secret_basic"},
		})
	case "/register":
		u.register(w, r)
	case "/authorize":
		u.authorize(w, r)
	case "/token":
		u.token(w, r)
	case "/mcp":
		u.mcp(w, r)
	default:
		http.NotFound(w, r)
	}
}

// register is dynamic client registration (RFC 7591). A client without a
// token_endpoint_auth_method gets client_secret_basic, the RFC's default.
func (u *identityUpstream) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		iduJSON(w, http.StatusMethodNotAllowed, iduErr("invalid_request", "use POST"))
		return
	}
	var meta struct {
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
		ClientName   string   `json:"client_name"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, iduMaxBody)).Decode(&meta); err != nil {
		iduJSON(w, http.StatusBadRequest, iduErr("invalid_client_metadata", "the body is not JSON"))
		return
	}
	if len(meta.RedirectURIs) == 0 {
		iduJSON(w, http.StatusBadRequest, iduErr("invalid_redirect_uri", "redirect_uris is required"))
		return
	}
	for _, ru := range meta.RedirectURIs {
		p, err := url.Parse(ru)
		if err != nil || !p.IsAbs() || p.Host == "" || p.Fragment != "" {
			iduJSON(w, http.StatusBadRequest, iduErr("invalid_redirect_uri", "redirect_uris must be absolute URLs without a fragment"))
			return
		}
	}
	if meta.AuthMethod == "" {
		meta.AuthMethod = "client_secret_basic"
	}
	c := &iduClient{id: "client-" + iduRandom(), method: meta.AuthMethod, redirects: slices.Clone(meta.RedirectURIs)}
	switch meta.AuthMethod {
	case "none":
	case "client_secret_post", "client_secret_basic":
		c.secret = "secret-" + iduRandom()
	default:
		iduJSON(w, http.StatusBadRequest, iduErr("invalid_client_metadata", "unsupported token_endpoint_auth_method"))
		return
	}
	u.mu.Lock()
	u.clients[c.id] = c
	u.registrations++
	u.mu.Unlock()
	out := map[string]any{
		"client_id": c.id, "client_id_issued_at": time.Now().Unix(), "client_name": meta.ClientName,
		"redirect_uris": c.redirects, "token_endpoint_auth_method": c.method,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
	}
	if c.secret != "" {
		out["client_secret"], out["client_secret_expires_at"] = c.secret, 0
	}
	iduJSON(w, http.StatusCreated, out)
}

// authorize is the authorization endpoint. A bad client_id or redirect_uri,
// or no signed-in user, gets a 400 page (never a redirect to an unchecked
// URI); other request errors redirect to the client with error (RFC 6749
// §4.1.2.1); a good request redirects with a fresh code and the state.
func (u *identityUpstream) authorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	u.mu.Lock()
	c := u.clients[q.Get("client_id")]
	u.mu.Unlock()
	if c == nil {
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	}
	redirect := q.Get("redirect_uri")
	if !slices.Contains(c.redirects, redirect) {
		http.Error(w, "redirect_uri is not the registered one", http.StatusBadRequest)
		return
	}
	user := r.Header.Get(iduUserHeader)
	if user == "" {
		http.Error(w, "no user is signed in at the upstream", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		to, _ := url.Parse(redirect) // parsed at registration
		rq := to.Query()
		for k, v := range params {
			rq[k] = v
		}
		if s := q.Get("state"); s != "" {
			rq.Set("state", s)
		}
		to.RawQuery = rq.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	}
	fail := func(code, desc string) { back(url.Values{"error": {code}, "error_description": {desc}}) }
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "response_type must be code")
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		fail("invalid_request", "PKCE with code_challenge_method S256 is required")
		return
	case q.Get("resource") != u.URL:
		fail("invalid_target", "resource must be "+u.URL)
		return
	}
	code := "code-" + iduRandom()
	u.mu.Lock()
	u.codes[code] = &iduCode{clientID: c.id, redirect: redirect, challenge: q.Get("code_challenge"), user: user,
		scope: strings.Join(strings.Fields(q.Get("scope")), " "), expires: time.Now().Add(iduCodeLife)}
	u.authorizations[user]++
	u.mu.Unlock()
	back(url.Values{"code": {code}})
}

// token is the token endpoint: the client authenticates as it registered,
// then an authorization_code or refresh_token grant issues a new access
// token (and a new refresh token, the old one retired).
func (u *identityUpstream) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		iduJSON(w, http.StatusMethodNotAllowed, iduErr("invalid_request", "use POST"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, iduMaxBody)
	if err := r.ParseForm(); err != nil {
		iduJSON(w, http.StatusBadRequest, iduErr("invalid_request", "the body is not a form"))
		return
	}
	f := r.PostForm
	c := u.clientOf(r)
	if c == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
		iduJSON(w, http.StatusUnauthorized, iduErr("invalid_client", "client authentication failed"))
		return
	}
	if res := f.Get("resource"); res != "" && res != u.URL {
		iduJSON(w, http.StatusBadRequest, iduErr("invalid_target", "resource must be "+u.URL))
		return
	}
	now := time.Now()
	var user, scope string
	u.mu.Lock()
	switch f.Get("grant_type") {
	case "authorization_code":
		code := u.codes[f.Get("code")]
		delete(u.codes, f.Get("code")) // single use, even when the request fails
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case code == nil || !now.Before(code.expires):
			u.mu.Unlock()
			iduJSON(w, http.StatusBadRequest, iduErr("invalid_grant", "unknown, used or expired code"))
			return
		case code.clientID != c.id || code.redirect != f.Get("redirect_uri"):
			u.mu.Unlock()
			iduJSON(w, http.StatusBadRequest, iduErr("invalid_grant", "the code was issued to another client or redirect_uri"))
			return
		case subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(code.challenge)) != 1:
			u.mu.Unlock()
			iduJSON(w, http.StatusBadRequest, iduErr("invalid_grant", "the code_verifier does not match the code_challenge"))
			return
		}
		user, scope = code.user, code.scope
	case "refresh_token":
		old := u.refresh[f.Get("refresh_token")]
		if old == nil || old.clientID != c.id {
			u.mu.Unlock()
			iduJSON(w, http.StatusBadRequest, iduErr("invalid_grant", "unknown or revoked refresh token"))
			return
		}
		delete(u.refresh, f.Get("refresh_token")) // rotated
		user, scope = old.user, old.scope
	default:
		u.mu.Unlock()
		iduJSON(w, http.StatusBadRequest, iduErr("unsupported_grant_type", "grant_type must be authorization_code or refresh_token"))
		return
	}
	at, rt := "at-"+iduRandom(), "rt-"+iduRandom()
	u.access[at] = &iduToken{user: user, clientID: c.id, scope: scope, expires: now.Add(iduAccessLife * time.Second)}
	u.refresh[rt] = &iduToken{user: user, clientID: c.id, scope: scope}
	u.tokens[user]++
	u.issued = append(u.issued, at, rt)
	u.mu.Unlock()
	// An unsigned OpenID Connect ID token names the user, as an
	// authorization server that exposes the account does.
	claims, _ := json.Marshal(map[string]string{"sub": "id-" + user, "preferred_username": user})
	idToken := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString(claims) + "."
	out := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": iduAccessLife, "refresh_token": rt, "id_token": idToken}
	if scope != "" {
		out["scope"] = scope
	}
	iduJSON(w, http.StatusOK, out)
}

// clientOf authenticates the token request's client with the method it
// registered: HTTP Basic (id and secret form-encoded, RFC 6749 §2.3.1),
// client_secret in the form, or client_id alone for a public client. nil
// when it fails.
func (u *identityUpstream) clientOf(r *http.Request) *iduClient {
	id, secret, basic := r.BasicAuth()
	method := "client_secret_basic"
	if basic {
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil || (r.PostForm.Get("client_id") != "" && r.PostForm.Get("client_id") != id) {
			return nil
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		method = "client_secret_post"
		if secret == "" {
			method = "none"
		}
	}
	u.mu.Lock()
	c := u.clients[id]
	u.mu.Unlock()
	if c == nil || c.method != method {
		return nil
	}
	if method != "none" && subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) != 1 {
		return nil
	}
	return c
}

// mcp is the MCP endpoint. Every request, whatever its method, needs a
// valid bearer token; the token's user is who the request is made as.
func (u *identityUpstream) mcp(w http.ResponseWriter, r *http.Request) {
	user, scope := u.bearerUser(r)
	if user == "" {
		ch := fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="read"`, u.srv.URL)
		if r.Header.Get("Authorization") != "" {
			ch = `Bearer error="invalid_token", ` + strings.TrimPrefix(ch, "Bearer ")
		}
		w.Header().Set("WWW-Authenticate", ch)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, iduMaxBody)).Decode(&req); err != nil {
		iduJSON(w, http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "parse error"}})
		return
	}
	if len(req.ID) == 0 || req.Method == "" {
		// A notification, or a response to a request of ours.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	reply := func(result any) {
		iduJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	fail := func(code int, msg string) {
		iduJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": code, "message": msg}})
	}
	textResult := func(s string, isErr bool) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": isErr}
	}
	switch req.Method {
	case "initialize":
		reply(map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "identity-upstream", "version": "1"}})
	case "ping":
		reply(map[string]any{})
	case "tools/list":
		reply(map[string]any{"tools": []any{
			map[string]any{"name": "whoami", "description": "Says which upstream user the call was made as.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}}},
			map[string]any{"name": "write_note", "description": "Needs the write scope (a step-up from read).",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}}},
			map[string]any{"name": "echo", "description": "Returns text.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}}},
		}})
	case "tools/call":
		var p struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil {
			fail(-32602, "invalid params")
			return
		}
		if p.Name == "write_note" && !slices.Contains(strings.Fields(scope), "write") {
			// A step-up: this tool needs the write scope the first
			// sign-in did not ask for.
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="read write", resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, u.srv.URL))
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return
		}
		u.mu.Lock()
		u.seen = append(u.seen, user)
		u.mu.Unlock()
		switch p.Name {
		case "whoami":
			reply(textResult("user="+user, false))
		case "write_note":
			reply(textResult("note written by "+user, false))
		case "echo":
			s, ok := p.Arguments["text"].(string)
			if !ok {
				reply(textResult("echo: text must be a string", true))
				return
			}
			reply(textResult(s, false))
		default:
			fail(-32602, "unknown tool: "+p.Name)
		}
	default:
		fail(-32601, "method not found: "+req.Method)
	}
}

// bearerUser is the user and scope of the request's valid, unexpired
// access token, or "" without one.
func (u *identityUpstream) bearerUser(r *http.Request) (user, scope string) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ""
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	at := u.access[strings.TrimSpace(tok)]
	if at == nil || !time.Now().Before(at.expires) {
		return "", ""
	}
	return at.user, at.scope
}

func iduJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func iduErr(code, desc string) map[string]any {
	return map[string]any{"error": code, "error_description": desc}
}

// iduRandom is 32 random bytes, base64url.
func iduRandom() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestIdentityUpstreamSelf exercises identityUpstream without the bridge:
// discovery, registration, the browser round trip, the code exchange, MCP
// calls as the token's user, refresh, revocation and the refusals.
func TestIdentityUpstreamSelf(t *testing.T) {
	u := newIdentityUpstream(t)
	base := strings.TrimSuffix(u.URL, "/mcp")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	// The client's redirect endpoint records what the browser brings.
	type landing struct{ code, state, err string }
	var cbMu sync.Mutex
	var landed []landing
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		cbMu.Lock()
		landed = append(landed, landing{q.Get("code"), q.Get("state"), q.Get("error")})
		cbMu.Unlock()
		fmt.Fprint(w, "callback ok")
	}))
	t.Cleanup(cb.Close)
	redirect := cb.URL + "/callback"
	last := func() landing {
		cbMu.Lock()
		defer cbMu.Unlock()
		if len(landed) == 0 {
			t.Fatal("the callback got nothing")
		}
		return landed[len(landed)-1]
	}

	getJSON := func(u string, v any) {
		t.Helper()
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", u, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	getJSON(base+"/.well-known/oauth-protected-resource/mcp", &prm)
	if prm.Resource != u.URL || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != base {
		t.Fatalf("protected resource metadata: %+v", prm)
	}
	var asm struct {
		Issuer                string `json:"issuer"`
		AuthorizationEndpoint string `json:"authorization_endpoint"`
		TokenEndpoint         string `json:"token_endpoint"`
		RegistrationEndpoint  string `json:"registration_endpoint"`
	}
	getJSON(base+"/.well-known/oauth-authorization-server", &asm)
	if asm.Issuer != base || asm.AuthorizationEndpoint == "" || asm.TokenEndpoint == "" || asm.RegistrationEndpoint == "" {
		t.Fatalf("authorization server metadata: %+v", asm)
	}

	type client struct{ id, secret, method string }
	register := func(method string) client {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"client_name": "self-test", "redirect_uris": []string{redirect},
			"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
			"token_endpoint_auth_method": method})
		resp, err := hc.Post(asm.RegistrationEndpoint, "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var reg struct {
			ClientID     string `json:"client_id"`
			ClientSecret string `json:"client_secret"`
			AuthMethod   string `json:"token_endpoint_auth_method"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&reg)
		if resp.StatusCode != http.StatusCreated || reg.ClientID == "" || reg.AuthMethod != method || (method != "none") != (reg.ClientSecret != "") {
			t.Fatalf("registration (%s): %d %+v", method, resp.StatusCode, reg)
		}
		return client{reg.ClientID, reg.ClientSecret, method}
	}
	// authURL is an authorization request with PKCE; it returns the URL
	// and the verifier.
	authURL := func(c client, state string, edit func(url.Values)) (string, string) {
		verifier := iduRandom()
		sum := sha256.Sum256([]byte(verifier))
		q := url.Values{"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {redirect}, "state": {state},
			"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
			"resource": {u.URL}, "scope": {"read"}}
		if edit != nil {
			edit(q)
		}
		return asm.AuthorizationEndpoint + "?" + q.Encode(), verifier
	}
	type tokens struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int    `json:"expires_in"`
		Error        string `json:"error"`
	}
	exchange := func(c client, form url.Values) (int, tokens) {
		t.Helper()
		form.Set("resource", u.URL)
		if c.method != "client_secret_basic" {
			form.Set("client_id", c.id)
		}
		if c.method == "client_secret_post" {
			form.Set("client_secret", c.secret)
		}
		req, _ := http.NewRequest(http.MethodPost, asm.TokenEndpoint, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.method == "client_secret_basic" {
			req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tr tokens
		_ = json.NewDecoder(resp.Body).Decode(&tr)
		return resp.StatusCode, tr
	}
	// signIn runs the whole browser round trip and code exchange for user.
	signIn := func(c client, user string) tokens {
		t.Helper()
		state := iduRandom()
		au, verifier := authURL(c, state, nil)
		status, body, err := u.Browse(au, user)
		if err != nil || status != http.StatusOK || body != "callback ok" {
			t.Fatalf("Browse as %s: %d %q %v", user, status, body, err)
		}
		got := last()
		if got.state != state || got.code == "" || got.err != "" {
			t.Fatalf("callback got %+v, want a code and state %q", got, state)
		}
		code, tr := exchange(c, url.Values{"grant_type": {"authorization_code"}, "code": {got.code},
			"redirect_uri": {redirect}, "code_verifier": {verifier}})
		if code != http.StatusOK || tr.AccessToken == "" || tr.RefreshToken == "" || tr.ExpiresIn != 3600 || tr.TokenType != "Bearer" {
			t.Fatalf("code exchange for %s: %d %+v", user, code, tr)
		}
		// The code is single use.
		if code, tr := exchange(c, url.Values{"grant_type": {"authorization_code"}, "code": {got.code},
			"redirect_uri": {redirect}, "code_verifier": {verifier}}); code != http.StatusBadRequest || tr.Error != "invalid_grant" {
			t.Errorf("second use of a code: %d %+v, want invalid_grant", code, tr)
		}
		return tr
	}

	type rpcReply struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			Content         []struct {
				Text string `json:"text"`
			} `json:"content"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	// rpc posts one JSON-RPC message to /mcp with token (none when empty).
	rpc := func(token, body string) (*http.Response, rpcReply) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out rpcReply
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatalf("reply to %s: %v", body, err)
			}
		}
		return resp, out
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	const whoami = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
	wantChallenge := fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="read"`, base)

	// Without a token, even initialize is refused with the challenge.
	resp, _ := rpc("", initialize)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != wantChallenge {
		t.Fatalf("initialize without a token: %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), wantChallenge)
	}

	// No signed-in user: the authorization endpoint refuses, nothing is issued.
	alice := register("none")
	if status, _, err := u.Browse(func() string { s, _ := authURL(alice, "x", nil); return s }(), ""); status != http.StatusBadRequest || err == nil {
		t.Errorf("Browse without a user: %d %v, want 400 and an error", status, err)
	}
	// A resource that is not the MCP URL comes back to the client as invalid_target.
	bad, _ := authURL(alice, "y", func(q url.Values) { q.Set("resource", base+"/other") })
	if status, _, err := u.Browse(bad, "alice"); err != nil || status != http.StatusOK || last().err != "invalid_target" {
		t.Errorf("wrong resource: %d %v %+v, want invalid_target at the callback", status, err, last())
	}
	if n := u.Authorizations("alice"); n != 0 {
		t.Errorf("Authorizations(alice) = %d after refusals, want 0", n)
	}

	at := signIn(alice, "alice")
	if resp, out := rpc(at.AccessToken, initialize); resp.StatusCode != http.StatusOK || out.Result.ProtocolVersion != "2025-06-18" {
		t.Fatalf("initialize: %d %+v", resp.StatusCode, out)
	}
	if resp, _ := rpc(at.AccessToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("notification: %d, want 202", resp.StatusCode)
	}
	if _, out := rpc(at.AccessToken, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); len(out.Result.Tools) != 3 {
		t.Errorf("tools/list: %+v", out)
	}
	if _, out := rpc(at.AccessToken, whoami); len(out.Result.Content) != 1 || out.Result.Content[0].Text != "user=alice" {
		t.Errorf("whoami as alice: %+v", out)
	}
	if _, out := rpc(at.AccessToken, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi \"there\""}}}`); len(out.Result.Content) != 1 || out.Result.Content[0].Text != `hi "there"` {
		t.Errorf("echo: %+v", out)
	}
	if _, out := rpc(at.AccessToken, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope","arguments":{}}}`); out.Error == nil {
		t.Errorf("unknown tool: %+v, want a JSON-RPC error", out)
	}
	req, _ := http.NewRequest(http.MethodGet, u.URL, nil)
	req.Header.Set("Authorization", "Bearer "+at.AccessToken)
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /mcp: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}

	// A second user with a confidential client (client_secret_basic) is
	// answered as himself.
	bob := register("client_secret_basic")
	bt := signIn(bob, "bob")
	if _, out := rpc(bt.AccessToken, whoami); len(out.Result.Content) != 1 || out.Result.Content[0].Text != "user=bob" {
		t.Errorf("whoami as bob: %+v", out)
	}
	// A refresh issues a new access token and retires the old refresh token.
	code, rt := exchange(bob, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {bt.RefreshToken}})
	if code != http.StatusOK || rt.AccessToken == "" || rt.RefreshToken == "" || rt.RefreshToken == bt.RefreshToken {
		t.Fatalf("refresh: %d %+v", code, rt)
	}
	if code, tr := exchange(bob, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {bt.RefreshToken}}); code != http.StatusBadRequest || tr.Error != "invalid_grant" {
		t.Errorf("reused refresh token: %d %+v, want invalid_grant", code, tr)
	}
	// Alice's client cannot use Bob's refresh token.
	if code, tr := exchange(alice, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt.RefreshToken}}); code != http.StatusBadRequest || tr.Error != "invalid_grant" {
		t.Errorf("another client's refresh token: %d %+v, want invalid_grant", code, tr)
	}
	if _, out := rpc(rt.AccessToken, whoami); len(out.Result.Content) != 1 || out.Result.Content[0].Text != "user=bob" {
		t.Errorf("whoami as bob after refresh: %+v", out)
	}

	// Revoking alice ends her tokens, not bob's.
	u.Revoke("alice")
	if resp, _ := rpc(at.AccessToken, whoami); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("revoked token: %d %q, want 401 invalid_token", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if code, tr := exchange(alice, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {at.RefreshToken}}); code != http.StatusBadRequest || tr.Error != "invalid_grant" {
		t.Errorf("revoked refresh token: %d %+v, want invalid_grant", code, tr)
	}
	if resp, _ := rpc(rt.AccessToken, whoami); resp.StatusCode != http.StatusOK {
		t.Errorf("bob after alice's revocation: %d", resp.StatusCode)
	}

	if got, want := u.Seen(), []string{"alice", "alice", "alice", "bob", "bob", "bob"}; !slices.Equal(got, want) {
		t.Errorf("Seen() = %v, want %v", got, want)
	}
	if a, b := u.Authorizations("alice"), u.Authorizations("bob"); a != 1 || b != 1 {
		t.Errorf("Authorizations: alice %d, bob %d, want 1 each", a, b)
	}
	if a, b := u.Tokens("alice"), u.Tokens("bob"); a != 1 || b != 2 {
		t.Errorf("Tokens: alice %d, bob %d, want 1 and 2", a, b)
	}
	if n := len(u.IssuedTokens()); n != 6 {
		t.Errorf("IssuedTokens() has %d, want 6 (three grants)", n)
	}
	if n := u.Registrations(); n != 2 {
		t.Errorf("Registrations() = %d, want 2", n)
	}
}
