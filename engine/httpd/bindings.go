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
type Bindings struct {
	mu    sync.Mutex
	owner map[string]string // session id → principal
}

// NewBindings returns an empty set.
func NewBindings() *Bindings { return &Bindings{owner: map[string]string{}} }

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
	m.b.owner[id] = m.principal
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
	delete(m.b.owner, id)
	return false, nil
}
