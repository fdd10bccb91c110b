package actors

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"
)

// Servers is the manager of the servers supervisor: one child supervisor
// per configured server, each running that server's client actor (SUP-2).
// It applies configuration diffs by config hash (RLD-3) and rebuilds the
// catalog whenever the configuration or a tool list changes.
type Servers struct {
	deps   *ClientDeps
	router *Router
	spec   func(name string) suture.Spec
	log    zerolog.Logger

	applies chan request[applyReq, applied]
	ping    chan struct{} // 1-buffered: new tool lists are waiting in mailbox

	mu      sync.Mutex // guards mailbox
	mailbox map[string]toolsUpdate

	// Owned by the Serve goroutine.
	policy  *Policy
	specs   []ServerSpec
	live    *serviceMap[string, *liveServer]
	tools   map[string][]ToolInfo
	pending map[string][]ToolInfo // tool updates applied at the next rebuild
	// stopping are removed clients whose process may still be dying, by
	// name: a client added under the same name starts after it (after).
	stopping map[string]*Client
}

type toolsUpdate struct {
	hash  string
	tools []ToolInfo
}

type liveServer struct {
	spec   ServerSpec
	client *Client
	// pairs are its principals' own connections (identity: principal);
	// nil for a shared server.
	pairs *identities
}

type applyReq struct {
	specs  []ServerSpec
	policy *Policy
}

// applied is a reload's diff and the router's signal that the catalog of
// the new configuration is the current one.
type applied struct {
	diff      Diff
	published <-chan struct{}
}

// Diff is what one reload changed.
type Diff struct {
	Added, Removed, Changed []string
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool { return len(d.Added)+len(d.Removed)+len(d.Changed) == 0 }

// NewServers returns the manager; sup is the servers supervisor, which also
// hosts the manager itself. spec builds each server's own supervisor spec.
func NewServers(sup *suture.Supervisor, deps *ClientDeps, router *Router, spec func(string) suture.Spec) *Servers {
	m := &Servers{
		deps: deps, router: router, spec: spec,
		log:      deps.Log.With().Str("actor", "servers").Logger(),
		applies:  make(chan request[applyReq, applied]),
		ping:     make(chan struct{}, 1),
		mailbox:  map[string]toolsUpdate{},
		live:     newServiceMap[string, *liveServer](sup),
		tools:    map[string][]ToolInfo{},
		stopping: map[string]*Client{},
	}
	deps.OnTools = m.onTools
	return m
}

func (m *Servers) String() string { return "servers" }

// onTools is the clients' callback: it never blocks (PXY-5).
func (m *Servers) onTools(name, hash string, tools []ToolInfo) {
	m.mu.Lock()
	m.mailbox[name] = toolsUpdate{hash, tools}
	m.mu.Unlock()
	select {
	case m.ping <- struct{}{}:
	default:
	}
}

// Apply replaces the desired configuration and returns the diff once the
// router publishes its catalog: a call after Apply sees the new servers.
// Only the discovery actor calls it, one reload at a time.
func (m *Servers) Apply(ctx context.Context, specs []ServerSpec, policy *Policy) (Diff, error) {
	a, err := ask(ctx, m.applies, nil, applyReq{specs, policy})
	if err != nil {
		return Diff{}, err
	}
	select {
	case <-a.published:
		return a.diff, nil
	case <-ctx.Done():
		return Diff{}, ctx.Err()
	}
}

// Serve runs the manager until ctx ends.
func (m *Servers) Serve(ctx context.Context) error {
	m.publish()
	for {
		select {
		case a := <-m.applies:
			m.policy = a.q.policy
			d := m.apply(a.q.specs)
			a.answer(applied{d, m.publish()})
		case <-m.ping:
			m.mu.Lock()
			box := m.mailbox
			m.mailbox = map[string]toolsUpdate{}
			m.mu.Unlock()
			changed := false
			for name, u := range box {
				if ls, ok := m.live.Get(name); ok && ls.spec.Hash == u.hash {
					if ls.pairs != nil {
						// Each principal may see other tools: search
						// covers them all.
						m.tools[name] = unionTools(m.tools[name], u.tools)
					} else {
						m.tools[name] = u.tools
					}
					changed = true
				}
			}
			if changed {
				m.publish()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apply diffs desired against running servers by config hash: unchanged
// ones keep their process, changed ones restart, removed ones stop, added
// ones start on first use.
func (m *Servers) apply(specs []ServerSpec) Diff {
	var d Diff
	want := map[string]ServerSpec{}
	for _, s := range specs {
		want[s.Name] = s
	}
	m.live.Each(func(name string, ls *liveServer) {
		s, ok := want[name]
		switch {
		case !ok:
			d.Removed = append(d.Removed, name)
			m.stop(name, ls, fmt.Sprintf("Server '%s' was removed from the configuration", name))
		case s.Hash != ls.spec.Hash:
			d.Changed = append(d.Changed, name)
			m.stop(name, ls, fmt.Sprintf("Server '%s' was reloaded during the call; retry the call", name))
		}
	})
	for _, s := range specs {
		if ls, ok := m.live.Get(s.Name); ok {
			ls.spec.Description, ls.spec.Alias = s.Description, s.Alias
			continue
		}
		if !contains(d.Changed, s.Name) {
			d.Added = append(d.Added, s.Name)
		}
		c := NewClient(s, m.deps)
		if old, ok := m.stopping[s.Name]; ok {
			c.after = old.stopped
		}
		sup := suture.New("server:"+s.Name, m.spec("server:"+s.Name))
		sup.Add(c)
		ls := &liveServer{spec: s, client: c}
		if s.ForPrincipal != nil {
			ls.pairs = newIdentities(s, m.deps, sup)
		}
		m.live.Add(s.Name, ls, sup)
		if cat, ok := m.deps.Store.Load(s.Hash); ok {
			m.tools[s.Name] = cat.Tools
		}
	}
	m.specs = specs
	for name, old := range m.stopping {
		select {
		case <-old.stopped:
			delete(m.stopping, name)
		default:
		}
	}
	if !d.Empty() {
		m.log.Info().Strs("added", d.Added).Strs("removed", d.Removed).Strs("changed", d.Changed).Msg("servers reloaded")
	}
	return d
}

// stop ends a server and forgets its tools; why is what its in-flight
// calls report (RLD-3). It does not wait for the server's process: a
// process slow to die must not stall other reloads or the catalog. The
// servers supervisor owns the stopping client and waits for it when it
// stops itself (Spec.Timeout); a client added under the same name starts
// its process only after this one's is dead (stopping).
func (m *Servers) stop(name string, ls *liveServer, why string) {
	ls.client.retire(why)
	if ls.pairs != nil {
		ls.pairs.retire(why)
	}
	delete(m.tools, name)
	m.stopping[name] = ls.client
	if err := m.live.Remove(name); err != nil {
		m.log.Warn().Err(err).Str("server", name).Msg("stopping server")
	}
}

// publish hands the router what the next catalog is built from; the
// returned channel is closed once that catalog is the current one.
func (m *Servers) publish() <-chan struct{} {
	clients := map[string]*Client{}
	pairs := map[string]*identities{}
	m.live.Each(func(name string, ls *liveServer) {
		clients[name] = ls.client
		if ls.pairs != nil {
			pairs[name] = ls.pairs
		}
	})
	return m.router.publish(catalogSource{specs: m.specs, clients: clients, pairs: pairs, tools: maps.Clone(m.tools), policy: m.policy})
}

// unionTools is old with new's tools added or replacing those of the same
// name, in old's order then new's.
func unionTools(old, new []ToolInfo) []ToolInfo {
	out := make([]ToolInfo, 0, len(old)+len(new))
	at := map[string]int{}
	for _, t := range old {
		at[t.Name] = len(out)
		out = append(out, t)
	}
	for _, t := range new {
		if i, ok := at[t.Name]; ok {
			out[i] = t
			continue
		}
		at[t.Name] = len(out)
		out = append(out, t)
	}
	return out
}
