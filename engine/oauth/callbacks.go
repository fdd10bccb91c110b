package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"sync"
	"time"
)

// Callbacks is the redirect endpoint of bridge serve, /oauth/callback on
// its public URL, shared by every principal's sign-ins (identity:
// principal). Each sign-in registers its state here before the link goes
// out; the browser's redirect delivers the code to that sign-in only.
//
// Invariants: a state is random (24 bytes), registered by exactly one
// sign-in (one principal, one server, one call), and used at most once. A
// state that is unknown, already used, or past its expiry is refused, and
// nothing reaches any sign-in. The page the browser gets names the server
// and the bridge principal the sign-in was for, never a token.
type Callbacks struct {
	// RedirectURI is the public URL of the endpoint, as sent to
	// authorization servers: <--public-url>/oauth/callback.
	RedirectURI string
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu      sync.Mutex
	pending map[string]*pendingSignIn
	// spent remembers used and expired states (bounded, oldest dropped) so
	// a second visit gets a precise refusal rather than "unknown".
	spent    map[string]string
	spentLog []string
}

// maxSpent bounds the remembered used or expired states.
const maxSpent = 4096

// resultWait bounds how long the callback page waits for the code's
// exchange, to say whether the sign-in worked.
const resultWait = 20 * time.Second

type pendingSignIn struct {
	principal, server string
	expires           time.Time
	codes             chan callback
	result            chan outcome // the exchange's; buffered, one value
}

// outcome is how a sign-in ended: err, or the upstream account it got
// tokens for ("" when the server did not say).
type outcome struct {
	err     error
	account string
}

// NewCallbacks returns the endpoint whose public address is redirect.
func NewCallbacks(redirect string) *Callbacks {
	return &Callbacks{RedirectURI: redirect, pending: map[string]*pendingSignIn{}, spent: map[string]string{}}
}

func (c *Callbacks) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// open registers state for principal's sign-in to server, valid for ttl.
// The returned channel gets the browser's redirect; done reports the
// exchange's outcome to the page and forgets the state (call it once).
func (c *Callbacks) open(state, principal, server string, ttl time.Duration) (codes <-chan callback, done func(outcome)) {
	p := &pendingSignIn{principal: principal, server: server, expires: c.now().Add(ttl),
		codes: make(chan callback, 1), result: make(chan outcome, 1)}
	c.mu.Lock()
	c.pending[state] = p
	c.mu.Unlock()
	return p.codes, func(o outcome) {
		p.result <- o
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.pending[state] == p {
			delete(c.pending, state)
			c.spend(state, "expired")
		}
	}
}

// spend remembers state as used or expired (under mu).
func (c *Callbacks) spend(state, why string) {
	if _, ok := c.spent[state]; !ok {
		c.spentLog = append(c.spentLog, state)
	}
	c.spent[state] = why
	for len(c.spentLog) > maxSpent {
		delete(c.spent, c.spentLog[0])
		c.spentLog = c.spentLog[1:]
	}
}

// take removes and returns the pending sign-in of state, or says why
// there is none: "used", "expired" or "unknown".
func (c *Callbacks) take(state string) (*pendingSignIn, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pending[state]
	if !ok {
		if why, ok := c.spent[state]; ok {
			return nil, why
		}
		return nil, "unknown"
	}
	delete(c.pending, state)
	if !c.now().Before(p.expires) {
		c.spend(state, "expired")
		return nil, "expired"
	}
	c.spend(state, "used")
	return p, ""
}

// Pending is the number of sign-ins waiting for their redirect.
func (c *Callbacks) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// ErrRefused marks a redirect the endpoint refused.
var ErrRefused = errors.New("sign-in callback refused")

// ServeHTTP is the redirect endpoint: GET with code and state (or error).
// It is exempt from the bridge's bearer auth (a browser arrives without
// one); the state is the credential. The caller bounds the request (rate,
// headers, no body).
func (c *Callbacks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		page(w, http.StatusMethodNotAllowed, "This address takes the browser's redirect after a sign-in, with GET.")
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" || len(state) > 256 {
		page(w, http.StatusBadRequest, "This sign-in redirect carries no state: start the sign-in again from your MCP client.")
		return
	}
	p, why := c.take(state)
	switch why {
	case "used":
		page(w, http.StatusBadRequest, "This sign-in link was already used. If the sign-in did not finish, run the call again from your MCP client for a new link.")
		return
	case "expired":
		page(w, http.StatusBadRequest, "This sign-in link expired (MCP_BRIDGE_APPROVAL_TIMEOUT). Run the call again from your MCP client for a new link.")
		return
	case "unknown":
		page(w, http.StatusBadRequest, "This bridge started no sign-in with this state. Open only links your own MCP client showed you.")
		return
	}
	p.codes <- callback{code: q.Get("code"), state: state, err: q.Get("error")}
	ctx, cancel := context.WithTimeout(r.Context(), resultWait)
	defer cancel()
	select {
	case o := <-p.result:
		if o.err != nil {
			page(w, http.StatusBadGateway, fmt.Sprintf("The sign-in to %s for bridge principal %s failed: %s", p.server, p.principal, o.err))
			return
		}
		as := "the account you just used at " + p.server
		if o.account != "" {
			as = "the account " + p.server + " names " + o.account
		}
		page(w, http.StatusOK, fmt.Sprintf("Signed in to %s for bridge principal %s. The tokens are %s: "+
			"if that is not you, tell the bridge's operator. You can close this tab.", p.server, p.principal, as))
	case <-ctx.Done():
		page(w, http.StatusAccepted, fmt.Sprintf("The sign-in to %s for bridge principal %s was received; your MCP client shows the result.", p.server, p.principal))
	}
}

// page writes a small HTML page; text is escaped.
func page(w http.ResponseWriter, status int, text string) {
	if status >= 400 {
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>bridge sign-in</title><p>bridge: %s</p>\n", html.EscapeString(text))
}
