package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/audit"
	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/alias"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// Replay verdicts.
const (
	VerdictSame     = "same"
	VerdictDiverged = "diverged"
	VerdictStopped  = "stopped"
)

// Replayed is what bridge replay found for one recorded call.
type Replayed struct {
	ID string `json:"id"`
	// Session is the recorded call's session (the replay's own is apart).
	Session string        `json:"session"`
	Result  result.Result `json:"-"`
	Verdict string        `json:"verdict"`
	// Detail is the first divergence, or why the replay stopped; for
	// "same", how many inner calls matched.
	Detail string `json:"detail"`
	// Prior is how many calls of the session were re-run first to rebuild
	// its state; Notes say what about them differed.
	Prior int      `json:"prior_calls"`
	Notes []string `json:"notes,omitempty"`
}

// ErrNotReplayable is a record that cannot be run again as it ran.
var ErrNotReplayable = errors.New("not replayable")

// Replay runs recorded call target again in a fresh sandbox of its own,
// after re-running prior (its session's calls before it, oldest first) to
// rebuild the session's state: snapshots keep only a session's latest
// state, never the state before an older call (docs/DECISIONS.md). Every
// request the code makes is answered from the record, and no server is
// started or contacted: the sandbox's server entries come from the disk's
// catalog. Saved tools are the current ones, so a changed saved tool shows
// as a divergence. Each call runs under its recorded timeout, or timeout
// when that is longer. Replay owns the engine: it is used for nothing else.
func (e *Engine) Replay(ctx context.Context, target *audit.Record, prior []*audit.Record, timeout time.Duration) (Replayed, error) {
	out := Replayed{ID: target.ID, Session: target.Session, Prior: len(prior)}
	calls := append(slices.Clone(prior), target)
	for _, r := range calls {
		if err := replayable(r); err != nil {
			return out, err
		}
	}
	e.sessions.SingleUse = true // one session: a spare would only be stopped again
	router := &replayRouter{live: e.router, red: e.red}
	e.sandboxCfg.Router = router
	// A replay writes no snapshot and no audit record: the session is not
	// the recorded one, and the trail records what clients ran.
	e.sandboxCfg.Snapshots, e.sandboxCfg.Durability = nil, actors.DurabilityOff
	e.sandboxCfg.Boot.Durability = actors.DurabilityOff
	if target.Principal != "" {
		e.router.StoreFor = e.principalStores()
	}
	specs, _ := e.loadConfig()

	ctx, cancel := context.WithCancel(ctx)
	root := suture.New("replay", e.spec())
	root.Add(e.sessSup)
	if e.Container != nil {
		root.Add(e.Container)
	}
	if e.Kube != nil {
		root.Add(e.Kube)
	}
	done := root.ServeBackground(ctx)
	defer func() { cancel(); <-done }()

	key := actors.SessionKey(target.Principal, "replay-"+target.ID)
	for i, r := range calls {
		m := newReplayMatch(r)
		router.use(m)
		res, err := e.replayCall(ctx, key, r, specs, timeout)
		if err != nil {
			return out, err
		}
		verdict, detail := m.verdict()
		if r != target {
			if verdict != VerdictSame {
				out.Notes = append(out.Notes, fmt.Sprintf("earlier call %s (%d of %d) %s: %s; the state it left may differ", r.ID, i+1, len(prior), verdict, detail))
			}
			continue
		}
		out.Result, out.Verdict, out.Detail = res, verdict, detail
	}
	return out, nil
}

// replayable says why r cannot be run again as it ran, if so.
func replayable(r *audit.Record) error {
	switch {
	case r.Code == nil:
		return fmt.Errorf("%w: record %s keeps only its code's digest (MCP_BRIDGE_AUDIT_CODE=hash)", ErrNotReplayable, r.ID)
	case audit.Digest(*r.Code) != r.CodeSHA:
		return fmt.Errorf("%w: record %s keeps its code redacted or cut, not as it ran", ErrNotReplayable, r.ID)
	}
	return nil
}

// replayCall runs one recorded call's code in the session of key.
func (e *Engine) replayCall(ctx context.Context, key string, r *audit.Record, specs []actors.ServerSpec, timeout time.Duration) (result.Result, error) {
	// The recorded timeout (the default for records without one); a
	// longer one given extends it.
	recorded := time.Duration(r.Timeout) * time.Second
	if recorded <= 0 {
		recorded = time.Duration(e.Env.Timeout) * time.Second
	}
	timeout = max(timeout, recorded)
	s, err := e.sessions.Get(ctx, key)
	if err != nil {
		return result.Result{}, err
	}
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	req := &actors.ExecRequest{Ctx: ctx, Code: *r.Code, Servers: e.replayServers(r.Servers, specs), Timeout: timeout,
		Deadline: time.Now().Add(timeout), MaxTimeout: e.Env.MaxTimeout, Reply: make(chan result.Result, 1), Discovered: names}
	if !s.Exec(ctx, req) {
		return result.Result{}, fmt.Errorf("replay: the session ended: %w", ctx.Err())
	}
	select {
	case res := <-req.Reply:
		return res, nil
	case <-ctx.Done():
		return result.Result{}, ctx.Err()
	}
}

// replayServers are the sandbox's entries for the granted servers, from
// the config and the catalog the disk keeps of each (PXY-8): no server is
// started. A server no longer configured, or never listed, gets an entry
// with no tools and an error saying so.
func (e *Engine) replayServers(names []string, specs []actors.ServerSpec) []protocol.Server {
	all := make([]string, len(specs))
	for i, s := range specs {
		all[i] = s.Name
	}
	aliases := alias.Servers(all) // as the live catalog computes them
	out := make([]protocol.Server, 0, len(names))
	for _, n := range names {
		i := slices.Index(all, n)
		if i < 0 {
			a := alias.Servers(append(slices.Clone(all), n))
			out = append(out, protocol.Server{Name: n, Alias: a[len(a)-1], Tools: []protocol.Tool{},
				Error: fmt.Sprintf("server '%s' is no longer configured: replay has no catalog of its tools", n)})
			continue
		}
		spec := specs[i]
		spec.Alias = aliases[i]
		cat, ok := e.store.Load(spec.Hash)
		if !ok {
			out = append(out, protocol.Server{Name: n, Alias: spec.Alias, Tools: []protocol.Tool{},
				Error: fmt.Sprintf("server '%s' has no catalog on disk: replay starts no server", n)})
			continue
		}
		out = append(out, actors.GrantEntry(spec, cat.Tools))
	}
	return out
}

// ReplayOne is a one-line report of r for people: its verdict and detail.
func ReplayOne(r Replayed) string {
	var b strings.Builder
	fmt.Fprintf(&b, "replay %s: %s", r.ID, r.Verdict)
	if r.Detail != "" {
		fmt.Fprintf(&b, ": %s", r.Detail)
	}
	return b.String()
}
