package actors

import (
	"context"
	"strings"

	"github.com/rs/zerolog"
)

// principal.go scopes a call to the principal that made it (bridge serve):
// sessions are keyed by (principal, session name), the memory and
// saved-tool store and the policy's grants are the principal's. The stdio
// front has no principal (""), and every key and lookup is then exactly
// what it was before principals existed.

type principalKey struct{}

// WithPrincipal returns ctx carrying the authenticated principal of the
// call; the HTTP front sets it, after authentication, for every request.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom is the principal ctx carries; "" for the stdio front.
func PrincipalFrom(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// keySep separates principal and session name in a session key. Neither a
// principal nor a session name may contain it (both are
// [A-Za-z0-9_.-]{1,64}), so a key names exactly one pair and no session
// name can reach another principal's session.
const keySep = "/"

// SessionKey is the sessions manager's key of principal's session name.
func SessionKey(principal, name string) string {
	if principal == "" {
		return name
	}
	return principal + keySep + name
}

// splitKey is SessionKey's inverse.
func splitKey(key string) (principal, name string) {
	if p, n, ok := strings.Cut(key, keySep); ok {
		return p, n
	}
	return "", key
}

// boxLabel is the session's label for its sandbox (container name and
// label): the key with the separator a container name cannot hold replaced.
func boxLabel(key string) string {
	return strings.ReplaceAll(key, keySep, "_")
}

// storeFor is the store of principal: the router's own for "" (stdio), else
// StoreFor's, so principals never share memory or saved tools. Without
// StoreFor a principal has no store at all rather than the shared one.
func (r *Router) storeFor(principal string) Store {
	if principal == "" {
		return r.Store
	}
	if r.StoreFor == nil {
		return nil
	}
	return r.StoreFor(principal)
}

// Counts is the number of live sessions by principal ("" for stdio), as of
// the last session lookup.
func (m *Sessions) Counts() map[string]int {
	if c := m.counts.Load(); c != nil {
		return *c
	}
	return map[string]int{}
}

// publishLive snapshots the live sessions (Get's index) and their counts
// by principal; Serve only, after the live set changed.
func (m *Sessions) publishLive() {
	c := map[string]int{}
	idx := make(map[string]*liveSession, m.live.Len())
	m.live.Each(func(k string, ls *liveSession) {
		p, _ := splitKey(k)
		c[p]++
		idx[k] = ls
	})
	m.counts.Store(&c)
	m.index.Store(&idx)
}

// sessionLog is a session's logger: its name, and its principal if any.
func sessionLog(l zerolog.Logger, name, principal string) zerolog.Logger {
	c := l.With().Str("actor", "session").Str("session", name)
	if principal != "" {
		c = c.Str("principal", principal)
	}
	return c.Logger()
}
