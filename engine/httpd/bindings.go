package httpd

import (
	"errors"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/actors"
)

// Bindings binds each MCP session id to the principal that created it: the
// id mcp-go mints on initialize is recorded with the caller's principal,
// and only that principal may use or delete it. It is mcp-go's session id
// manager (through Resolver), so the binding is made before the id leaves.
//
// A principal holds at most MaxPerPrincipal ids: a client that initializes
// over and over (ids live until DELETE or mcp-go's idle sweep) cannot grow
// the bridge's memory without bound; past the cap its oldest id is
// dropped, and that client gets 404 and initializes again.
type Bindings struct {
	mu    sync.Mutex
	owner map[string]string   // session id → principal
	order map[string][]string // principal → its ids, oldest first (may hold ended ones)
	count map[string]int      // principal → live ids
	max   int
}

// MaxPerPrincipal is the default cap of MCP session ids per principal.
const MaxPerPrincipal = 1024

// NewBindings returns an empty set.
func NewBindings() *Bindings {
	return &Bindings{owner: map[string]string{}, order: map[string][]string{}, count: map[string]int{}, max: MaxPerPrincipal}
}

// add binds id to principal, dropping the principal's oldest ids past the
// cap; b.mu is held.
func (b *Bindings) add(id, principal string) {
	ids := b.order[principal]
	for b.count[principal] >= b.max && len(ids) > 0 {
		old := ids[0]
		ids = ids[1:]
		if p, ok := b.owner[old]; ok && p == principal {
			delete(b.owner, old)
			b.count[principal]--
		}
	}
	// Ended ids are dropped from the front as they come; compact when
	// most of the slice is ended ones.
	if len(ids) > 2*b.max {
		live := ids[:0]
		for _, x := range ids {
			if b.owner[x] == principal {
				live = append(live, x)
			}
		}
		ids = live
	}
	b.owner[id] = principal
	b.order[principal] = append(ids, id)
	b.count[principal]++
}

// remove unbinds id; b.mu is held.
func (b *Bindings) remove(id string) {
	if p, ok := b.owner[id]; ok {
		delete(b.owner, id)
		b.count[p]--
	}
}

// Owns reports whether id is a live session of principal.
func (b *Bindings) Owns(principal, id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.owner[id]
	return ok && p == principal
}

// Len is the number of live MCP sessions.
func (b *Bindings) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.owner)
}

// Resolver is mcp-go's session id manager resolver: each request gets a
// manager bound to its principal; mcp-go's own sweeps (no request) get one
// that may end any session.
func (b *Bindings) Resolver() server.SessionIdManagerResolver { return resolver{b} }

type resolver struct{ b *Bindings }

func (r resolver) ResolveSessionIdManager(req *http.Request) server.SessionIdManager {
	if req == nil {
		return manager{b: r.b, any: true}
	}
	return manager{b: r.b, principal: actors.PrincipalFrom(req.Context())}
}

type manager struct {
	b         *Bindings
	principal string
	any       bool // mcp-go's sweeper and shutdown: no request, no principal
}

var errNotYours = errors.New("unknown session id")

func (m manager) Generate() string {
	id := uuid.NewString()
	m.b.mu.Lock()
	m.b.add(id, m.principal)
	m.b.mu.Unlock()
	return id
}

func (m manager) Validate(id string) (bool, error) {
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	p, ok := m.b.owner[id]
	if !ok || (!m.any && p != m.principal) {
		return false, errNotYours
	}
	return false, nil
}

func (m manager) Terminate(id string) (bool, error) {
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	p, ok := m.b.owner[id]
	if !ok || (!m.any && p != m.principal) {
		return false, errNotYours
	}
	m.b.remove(id)
	return false, nil
}
