package actors

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/thejerf/suture/v4"
)

// identities.go gives each principal of bridge serve their own connection
// to a server whose config says "identity": "principal": a client actor
// per (server, principal) pair, whose transport carries that principal's
// sign-in only. The server's own client (the catalog's) keeps the shared
// login, if any, and only lists tools; no call of a principal goes through
// it.
//
// Invariants: a pair's client is created with ForPrincipal(principal), so
// its requests carry that principal's token and no other; at most max
// pairs live at once; a pair is dropped only while no call holds it.

// identities is the pool of one server's pairs. Its state is read and
// written by callers under mu (a lease is a map lookup, not a round trip to
// an actor); the pairs' clients run under the server's own supervisor.
type identities struct {
	spec ServerSpec // the server's spec; ForPrincipal is non-nil
	deps *ClientDeps
	sup  *suture.Supervisor
	// max caps live pairs (MCP_BRIDGE_MAX_IDENTITY_CONNS); idle drops a
	// pair unused for that long (MCP_BRIDGE_SERVER_IDLE_TIMEOUT; <= 0
	// never).
	max  int
	idle time.Duration
	now  func() time.Time

	mu      sync.Mutex
	pairs   map[string]*pair
	retired string // set once the server is removed: why its calls fail
}

type pair struct {
	client *Client
	token  suture.ServiceToken
	refs   int // calls holding the pair
	used   time.Time
}

func newIdentities(spec ServerSpec, deps *ClientDeps, sup *suture.Supervisor) *identities {
	return &identities{spec: spec, deps: deps, sup: sup, max: max(deps.MaxIdentityConns, 1), idle: deps.IdleTimeout,
		now: time.Now, pairs: map[string]*pair{}}
}

// identityConnsError is a lease refused because every pair is in use.
type identityConnsError struct {
	server string
	max    int
}

func (e *identityConnsError) Error() string {
	return fmt.Sprintf("Server '%s' has %d principals' connections in use, its limit (MCP_BRIDGE_MAX_IDENTITY_CONNS); retry in a moment", e.server, e.max)
}

// lease returns principal's client, creating the pair when it has none,
// and a release the caller runs once its use ends. At the cap, the pair
// used least recently that no call holds is stopped first.
func (p *identities) lease(principal string) (*Client, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired != "" {
		return nil, nil, fmt.Errorf("%s", p.retired)
	}
	now := p.now()
	p.dropIdle(now)
	pr, ok := p.pairs[principal]
	if !ok {
		if len(p.pairs) >= p.max && !p.dropOldest() {
			return nil, nil, &identityConnsError{p.spec.Name, p.max}
		}
		c := NewClient(p.spec.ForPrincipal(principal), p.deps)
		c.log = c.log.With().Str("principal", principal).Logger()
		pr = &pair{client: c, token: p.sup.Add(c)}
		p.pairs[principal] = pr
	}
	pr.refs++
	pr.used = now
	var once sync.Once
	return pr.client, func() {
		once.Do(func() {
			p.mu.Lock()
			pr.refs--
			pr.used = p.now()
			p.mu.Unlock()
		})
	}, nil
}

// dropIdle stops the pairs no call has used for idle (under mu): their
// connection is closed by the client's own idle stop already, and the
// actor goes too, so idle pairs do not count against the cap.
func (p *identities) dropIdle(now time.Time) {
	if p.idle <= 0 {
		return
	}
	for principal, pr := range p.pairs {
		if pr.refs == 0 && now.Sub(pr.used) >= p.idle {
			p.drop(principal, pr)
		}
	}
}

// dropOldest stops the least recently used pair no call holds (under
// mu); false when every pair is held.
func (p *identities) dropOldest() bool {
	names := make([]string, 0, len(p.pairs))
	for name, pr := range p.pairs {
		if pr.refs == 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return false
	}
	sort.Slice(names, func(i, j int) bool { return p.pairs[names[i]].used.Before(p.pairs[names[j]].used) })
	p.drop(names[0], p.pairs[names[0]])
	return true
}

// drop stops one pair without waiting for its process (under mu).
func (p *identities) drop(principal string, pr *pair) {
	delete(p.pairs, principal)
	pr.client.retire(fmt.Sprintf("Server '%s': the connection of principal %s was closed; retry the call", p.spec.Name, principal))
	_ = p.sup.Remove(pr.token) // no wait: the supervisor owns the stop
}

// forget stops principal's pair (a sign-out), if any; the next lease
// starts a new one, without the forgotten token.
func (p *identities) forget(principal string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr, ok := p.pairs[principal]; ok {
		p.drop(principal, pr)
	}
}

// retire fails every later lease with why; the pairs stop with the
// server's supervisor.
func (p *identities) retire(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retired = why
	for _, pr := range p.pairs {
		pr.client.retire(why)
	}
}

// existing is principal's pair client; nil when they have none.
func (p *identities) existing(principal string) *Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr, ok := p.pairs[principal]; ok {
		return pr.client
	}
	return nil
}

// live is the number of pairs.
func (p *identities) live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// SignIn is one of a principal's own sign-ins, as runtime.signins() shows
// it: never a token.
type SignIn struct {
	Server  string    `json:"server"`
	State   string    `json:"state"`             // "signed in", "expired, refreshed on next use", "expired"
	Account string    `json:"account,omitempty"` // the upstream account, when the server named it
	Scope   string    `json:"scope,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// SignIns is the store of principals' own sign-ins (engine): each method
// touches principal's records only.
type SignIns interface {
	// List is principal's sign-ins, by server name.
	List(principal string) []SignIn
	// SignOut forgets principal's tokens for server; false when there
	// were none. The caller then closes principal's connection to it.
	SignOut(principal, server string) (bool, error)
}
