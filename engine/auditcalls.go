package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/audit"
	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// auditTrail writes one audit record per run_python call (engine/audit):
// the Dispatcher's Audit hook begins it, the call's CallRecorder collects
// its inner requests and approvals, and the call's end appends it.
type auditTrail struct {
	dir      string
	serving  bool
	log      *audit.Log
	codeHash bool // MCP_BRIDGE_AUDIT_CODE=hash: the code's digest only
	red      *audit.Redactor
	errs     zerolog.Logger
}

// AuditDir is where the audit trail of state dir state lives.
func AuditDir(state string) string { return filepath.Join(state, ".bridge", "audit") }

// auditOn is whether env keeps an audit trail: MCP_BRIDGE_AUDIT, else on
// under bridge serve and off for bridge run and exec.
func auditOn(env Env) bool {
	if env.Audit == "" {
		return env.Serving
	}
	return env.Audit == "on"
}

// openAudit opens the audit trail of env, or returns nil when it is off.
// Under bridge serve each record is synced before the call's result is
// returned; bridge run leaves write-back to the kernel (docs/DECISIONS.md).
func openAudit(env Env, log zerolog.Logger, red *audit.Redactor, loadKey func() ([]byte, error)) (*auditTrail, error) {
	if !auditOn(env) {
		return nil, nil
	}
	key, err := loadKey()
	if err != nil {
		return nil, fmt.Errorf("audit: %w (MCP_BRIDGE_KEY_FILE)", err)
	}
	dir := AuditDir(env.StateDir)
	l, err := audit.Open(dir, key, audit.Options{MaxFileBytes: env.AuditMaxFile, Retention: env.AuditRetention, Sync: env.Serving})
	if err != nil {
		return nil, err
	}
	a := &auditTrail{dir: dir, serving: env.Serving, log: l, codeHash: env.AuditCode == "hash", errs: log.With().Str("actor", "audit").Logger(), red: red}
	return a, nil
}

// history is Router.History: the principal's last n calls, each as a
// summary (no arguments or results: the code, and each inner call's name,
// outcome and duration).
func (a *auditTrail) history(principal string, n int) ([]json.RawMessage, error) {
	if principal == "" && a.serving {
		return nil, nil // every call under serve has a principal
	}
	recs, err := audit.Last(a.dir, audit.Filter{Principal: principal, ExactPrincipal: true}, n)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(recs))
	for _, r := range recs {
		type inner struct {
			Method  string `json:"method"`
			Server  string `json:"server,omitempty"`
			Tool    string `json:"tool,omitempty"`
			Outcome string `json:"outcome"`
			Ms      int64  `json:"duration_ms"`
		}
		s := struct {
			ID       string    `json:"id"`
			Time     time.Time `json:"time"`
			Session  string    `json:"session"`
			Call     int64     `json:"call"`
			Status   string    `json:"status"`
			ExitCode *int      `json:"exit_code"`
			Ms       int64     `json:"duration_ms"`
			CodeSHA  string    `json:"code_sha256"`
			Code     *string   `json:"code"`
			Servers  []string  `json:"servers"`
			Inner    []inner   `json:"inner"`
		}{r.ID, r.Time, r.Session, r.Call, r.Status, r.ExitCode, r.DurMs, r.CodeSHA, r.Code, r.Servers, []inner{}}
		for _, in := range r.Inner {
			s.Inner = append(s.Inner, inner{in.Method, in.Server, in.Tool, in.Outcome, in.Ms})
		}
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// begin is the Dispatcher's Audit hook.
func (a *auditTrail) begin(ctx context.Context, args actors.Args) (context.Context, func(result.Result)) {
	if internalCall(ctx) {
		return ctx, func(result.Result) {}
	}
	c := &callAudit{trail: a, began: time.Now()}
	c.rec = audit.Record{Kind: audit.KindCall, Principal: actors.PrincipalFrom(ctx), Client: actors.ClientName(ctx),
		Session: args.Session, CodeSHA: audit.Digest(args.Code), Servers: args.Servers, Timeout: args.Timeout}
	if !a.codeHash {
		code := a.red.String(args.Code)
		if len(code) > audit.MaxValueBytes {
			code = code[:audit.MaxValueBytes] // its digest is beside it
		}
		c.rec.Code = &code
	}
	return actors.WithRecorder(ctx, c), c.end
}

// maxRecordValues bounds the bytes of stored values in one record: past
// it, inner calls keep their digests only.
const maxRecordValues = 4 << 20

// callAudit is the CallRecorder of one call.
type callAudit struct {
	trail *auditTrail
	began time.Time

	mu     sync.Mutex
	rec    audit.Record
	stored int
	done   bool // the record was written: later requests (a job's) are dropped
}

var _ actors.CallRecorder = (*callAudit)(nil)

func (c *callAudit) Numbered(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rec.Call = n
}

func (c *callAudit) Inner(method string, params json.RawMessage, res any, err error, began time.Time, d time.Duration) {
	if method == protocol.MethodSavedTools && params == nil {
		return // the host's own fetch before the code runs
	}
	red := c.trail.red
	in := audit.Inner{Method: method, Outcome: "ok", Ms: d.Milliseconds()}
	var args json.RawMessage
	in.Server, in.Tool, args = innerArgs(method, params)
	in.Args = audit.NewValue(args, red)
	if err != nil {
		in.Outcome = red.String(err.Error())
		in.Code, in.Kind, _ = actors.LinkErrorOf(err)
	} else if b, merr := json.Marshal(res); merr == nil {
		in.Bytes = len(b)
		if method != protocol.MethodHistory { // earlier records, already in the trail
			in.Result = audit.NewValue(b, red)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	for _, v := range []*audit.Value{in.Args, in.Result} {
		if v != nil && v.JSON != nil {
			if c.stored+len(v.JSON) > maxRecordValues {
				v.JSON = nil
			} else {
				c.stored += len(v.JSON)
			}
		}
	}
	c.rec.Inner = append(c.rec.Inner, in)
}

func (c *callAudit) Approval(server, tool, decision string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		c.rec.Approvals = append(c.rec.Approvals, audit.Ask{Server: server, Tool: tool, Decision: decision, Decider: c.rec.Client})
	}
}

// end completes the record with the call's result and appends it.
func (c *callAudit) end(res result.Result) {
	c.mu.Lock()
	c.done = true
	rec := c.rec
	c.mu.Unlock()
	rec.Status, rec.ExitCode, rec.DurMs = res.Status, res.ExitCode, time.Since(c.began).Milliseconds()
	if rec.Session == "" {
		rec.Session = res.Session
	}
	for _, ch := range res.Output {
		rec.OutBytes += len(ch.Data)
	}
	if err := c.trail.log.Append(&rec); err != nil {
		c.trail.errs.Error().Err(err).Msg("audit record not written")
	}
}

type internalKey struct{}

// withInternal marks ctx's calls as the bridge's own (the spill copy): they
// are not the client's, so they get no audit record.
func withInternal(ctx context.Context) context.Context {
	return context.WithValue(ctx, internalKey{}, true)
}

func internalCall(ctx context.Context) bool {
	v, _ := ctx.Value(internalKey{}).(bool)
	return v
}

// doctorAudit says whether calls leave audit records, and where.
func (e *Engine) doctorAudit(add func(status, name, format string, a ...any)) {
	switch {
	case e.auditErr != nil:
		add("WARN", "audit", "%v; calls leave no audit record until it is fixed", e.auditErr)
	case e.audit == nil:
		add("OK", "audit", "off (on under bridge serve; MCP_BRIDGE_AUDIT=on turns it on)")
	default:
		files, _ := audit.Files(e.audit.dir)
		add("OK", "audit", "on: %d files in %s, chained with %s; bridge audit verify checks them", len(files), e.audit.dir, e.Env.KeyFile)
	}
}

// innerArgs splits a box→host request as its record keeps it: a tool
// call's server, tool and arguments; any other request's params whole.
func innerArgs(method string, params json.RawMessage) (server, tool string, args json.RawMessage) {
	if method == protocol.MethodCallTool {
		var p struct {
			Server    string          `json:"server"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal(params, &p) == nil {
			return p.Server, p.Tool, p.Arguments
		}
	}
	return "", "", params
}
