package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/audit"
	"github.com/bridge-mcp/bridge/protocol"
)

// replayRouter serves a replayed call's box→host requests from its record
// (replayMatch) and never from a server. Saved tools are the one exception:
// they are read from the store as now, since checking a changed saved tool
// against recorded traffic is what replay is for.
type replayRouter struct {
	live *actors.Router
	red  *audit.Redactor
	cur  atomic.Pointer[replayMatch]
}

var _ actors.RequestRouter = (*replayRouter)(nil)

// use makes m answer the requests from now on (calls replay one at a time).
func (rr *replayRouter) use(m *replayMatch) { rr.cur.Store(m) }

func (rr *replayRouter) ServeSandbox(ctx context.Context, scope actors.Scope, method string, params json.RawMessage) (any, error) {
	if method == protocol.MethodSavedTools {
		return rr.live.ServeSandbox(ctx, scope, method, params)
	}
	m := rr.cur.Load()
	if m == nil {
		return nil, actors.LinkError(protocol.CodeServerError, protocol.KindServerError, "replay: no recorded call is being replayed")
	}
	return m.answer(method, params, rr.red)
}

// replayMatch matches one call's live requests against its recorded inner
// calls, as a multiset: concurrent requests (asyncio.gather) may arrive in
// any order, so a request takes the first unanswered recorded call with the
// same method, server, tool and (redacted) arguments, wherever it stands.
// The first request that matches none is the divergence, described against
// the first recorded call still unanswered; so are recorded calls the
// replay never made.
type replayMatch struct {
	mu       sync.Mutex
	rec      []audit.Inner
	answered []bool
	first    string // the first divergence; "" while none
	stopped  string // why the replay cannot go on; "" while it can
}

func newReplayMatch(r *audit.Record) *replayMatch {
	m := &replayMatch{}
	for _, in := range r.Inner {
		if in.Method != protocol.MethodSavedTools { // served as now, not from the record
			m.rec = append(m.rec, in)
		}
	}
	m.answered = make([]bool, len(m.rec))
	return m
}

// request is a live request as the record keeps it.
type request struct {
	method, server, tool string
	args                 *audit.Value
}

func liveRequest(method string, params json.RawMessage, red *audit.Redactor) request {
	q := request{method: method}
	var args json.RawMessage
	q.server, q.tool, args = innerArgs(method, params)
	q.args = audit.NewValue(args, red)
	return q
}

// name is how a divergence names a request: the proxy's call for a tool,
// the method for the rest.
func name(method, server, tool string) string {
	if method == protocol.MethodCallTool {
		return "mcp_" + server + "." + tool
	}
	return method
}

func (m *replayMatch) answer(method string, params json.RawMessage, red *audit.Redactor) (any, error) {
	q := liveRequest(method, params, red)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped != "" {
		return nil, replayError("replay stopped: " + m.stopped)
	}
	i := -1
	for j, in := range m.rec {
		if !m.answered[j] && in.Method == q.method && in.Server == q.server && in.Tool == q.tool && sameValue(in.Args, q.args) {
			i = j
			break
		}
	}
	if i < 0 {
		m.diverge(q)
		return nil, replayError("replay: this request is not in the record (" + m.first + ")")
	}
	m.answered[i] = true
	in := m.rec[i]
	if in.Outcome != "ok" {
		code, kind := in.Code, in.Kind
		if code == 0 {
			code, kind = protocol.CodeServerError, protocol.KindServerError
		}
		return nil, actors.LinkError(code, kind, in.Outcome)
	}
	if in.Result == nil || in.Result.JSON == nil {
		m.stopped = fmt.Sprintf("call %d: %s: its result (%d bytes) is stored as its digest only, over the record's cap; replay cannot answer it",
			i+1, name(in.Method, in.Server, in.Tool), in.Bytes)
		return nil, replayError("replay stopped: " + m.stopped)
	}
	return json.RawMessage(in.Result.JSON), nil
}

// diverge notes q as the first divergence, when it is: described against
// the first recorded call not yet answered.
func (m *replayMatch) diverge(q request) {
	if m.first != "" {
		return
	}
	next := slices.Index(m.answered, false)
	live := name(q.method, q.server, q.tool)
	switch {
	case next < 0:
		m.first = fmt.Sprintf("call %d: %s: not in the record (it has %d calls)", len(m.rec)+1, live, len(m.rec))
	case name(m.rec[next].Method, m.rec[next].Server, m.rec[next].Tool) != live:
		m.first = fmt.Sprintf("call %d: %s, where the record has %s", next+1, live, name(m.rec[next].Method, m.rec[next].Server, m.rec[next].Tool))
	default:
		m.first = fmt.Sprintf("call %d: %s: arguments differ: %s", next+1, live, argDiff(m.rec[next].Args, q.args))
	}
}

// verdict is the call's: stopped, diverged (a request not in the record,
// or a recorded one never made) or same.
func (m *replayMatch) verdict() (string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.stopped != "":
		return VerdictStopped, m.stopped
	case m.first != "":
		return VerdictDiverged, m.first
	}
	if i := slices.Index(m.answered, false); i >= 0 {
		in := m.rec[i]
		return VerdictDiverged, fmt.Sprintf("call %d: %s: recorded, but the replay did not make it", i+1, name(in.Method, in.Server, in.Tool))
	}
	return VerdictSame, fmt.Sprintf("%d inner calls as recorded", len(m.rec))
}

// sameValue reports whether two stored values are the same: by digest,
// which every stored value keeps, also over the cap.
func sameValue(a, b *audit.Value) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.SHA256 == b.SHA256
}

// argDiff names where two argument values differ: the first key (in
// sorted order, dotted for nested objects) whose value differs, or
// "values" when they are not both objects.
func argDiff(rec, live *audit.Value) string {
	if rec == nil || live == nil || rec.JSON == nil || live.JSON == nil {
		return "values (stored as digests)"
	}
	var a, b any
	if json.Unmarshal(rec.JSON, &a) != nil || json.Unmarshal(live.JSON, &b) != nil {
		return "values"
	}
	if path := firstDiff(a, b, ""); path != "" {
		return path
	}
	return "values"
}

func firstDiff(a, b any, at string) string {
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if !okA || !okB {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if bytes.Equal(ja, jb) {
			return ""
		}
		if at == "" {
			return "values"
		}
		return at
	}
	keys := make([]string, 0, len(ma)+len(mb))
	for k := range ma {
		keys = append(keys, k)
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := k
		if at != "" {
			p = at + "." + k
		}
		if d := firstDiff(ma[k], mb[k], p); d != "" {
			return d
		}
	}
	return ""
}

// replayError is the error a request gets when the record cannot answer
// it: the cell sees an MCPError, as from a failed call.
func replayError(msg string) error {
	return actors.LinkError(protocol.CodeServerError, protocol.KindServerError, msg)
}
