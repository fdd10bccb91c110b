package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

var sessionRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Dispatcher turns raw run_python arguments into a Result: it validates them
// (SPEC §4.3), resolves the servers with the router, and runs the code in
// the named session. The front actor and `bridge exec` share it.
type Dispatcher struct {
	Sessions *Sessions
	// Discovery confirms the configuration is current before each call
	// (RLD-1); Router maps the servers argument to the granted servers and
	// lists every configured one for MCP_DISCOVERED_SERVERS.
	Discovery      *Discovery
	Router         *Router
	DefaultTimeout int
	MaxTimeout     int
	MaxCodeBytes   int
	// Audit, when set, begins the audit record of each call that gets past
	// validation: it returns the call's context (carrying its
	// CallRecorder) and the function that ends the record with the result.
	Audit func(ctx context.Context, args Args) (context.Context, func(result.Result))
}

// Args are validated run_python arguments.
type Args struct {
	Code    string
	Servers []string
	Timeout int
	Session string
	Notes   []string
}

// Validate checks raw arguments in the order of §4.3; the first failure wins.
func (d *Dispatcher) Validate(raw json.RawMessage) (Args, string) {
	var fields map[string]json.RawMessage
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &fields); err != nil {
			return Args{}, "Missing 'code' argument"
		}
	}
	present := func(k string) (json.RawMessage, bool) {
		v, ok := fields[k]
		return v, ok && string(v) != "null"
	}
	a := Args{Timeout: d.DefaultTimeout, Session: result.DefaultSession}
	v, ok := present("code")
	if !ok || json.Unmarshal(v, &a.Code) != nil || strings.TrimSpace(a.Code) == "" {
		return Args{}, "Missing 'code' argument"
	}
	if len(a.Code) > d.MaxCodeBytes {
		return Args{}, fmt.Sprintf("'code' is %d bytes; the limit is %d bytes", len(a.Code), d.MaxCodeBytes)
	}
	if v, ok := present("servers"); ok {
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			return Args{}, "'servers' must be a list"
		}
		seen := map[string]bool{}
		for _, it := range items {
			var s string
			if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &s) != nil {
				return Args{}, "'servers' must be a list of strings"
			}
			if !seen[s] { // VAL-1: duplicates dropped, first occurrence kept
				seen[s] = true
				a.Servers = append(a.Servers, s)
			}
		}
	}
	if v, ok := present("timeout"); ok {
		var n json.Number
		if json.Unmarshal(v, &n) != nil || strings.ContainsAny(string(v), ".eE\"") {
			return Args{}, "'timeout' must be an integer"
		}
		t, err := n.Int64()
		if err != nil && !strings.HasPrefix(string(n), "-") {
			t = int64(d.MaxTimeout) + 1 // huge: clamp below
		} else if err != nil || t < 1 {
			return Args{}, fmt.Sprintf("'timeout' must be between 1 and %d seconds", d.MaxTimeout)
		}
		if t > int64(d.MaxTimeout) {
			t = int64(d.MaxTimeout)
			a.Notes = append(a.Notes, fmt.Sprintf("timeout clamped to %ds (MCP_BRIDGE_MAX_TIMEOUT)", d.MaxTimeout))
		}
		a.Timeout = int(t)
	}
	if v, ok := present("session"); ok {
		if json.Unmarshal(v, &a.Session) != nil || !sessionRe.MatchString(a.Session) {
			return Args{}, "'session' must be 1-64 characters from A-Z a-z 0-9 _ . -"
		}
	}
	if note := unknownArgs(fields); note != "" {
		a.Notes = append(a.Notes, note)
	}
	return a, ""
}

// runPythonArgs are the arguments run_python takes.
var runPythonArgs = []string{"code", "servers", "timeout", "session"}

// unknownArgs is a note naming the arguments run_python does not take (a
// model may send `language`, say), which are ignored; "" when none.
func unknownArgs(fields map[string]json.RawMessage) string {
	var unknown []string
	for k := range fields {
		if !slices.Contains(runPythonArgs, k) {
			unknown = append(unknown, "'"+printable.Log(clip(k, 40))+"'")
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	slices.Sort(unknown)
	what := "argument"
	if len(unknown) > 1 {
		what = "arguments"
	}
	if len(unknown) > 5 {
		unknown = append(unknown[:5], fmt.Sprintf("and %d more", len(unknown)-5))
	}
	return fmt.Sprintf("ignored %s %s: run_python takes only %s", what, strings.Join(unknown, ", "), strings.Join(runPythonArgs, ", "))
}

// Run validates raw and runs the call.
func (d *Dispatcher) Run(ctx context.Context, raw json.RawMessage) (res result.Result) {
	queued := time.Now()
	args, msg := d.Validate(raw)
	if msg != "" {
		return result.Result{Status: result.StatusValidation, Error: msg, Session: result.DefaultSession}
	}
	defer func() { res.Notes = append(res.Notes, args.Notes...) }()
	return d.RunArgs(ctx, args, queued)
}

// RunArgs runs validated arguments; queued starts the timeout clock.
func (d *Dispatcher) RunArgs(ctx context.Context, args Args, queued time.Time) (res result.Result) {
	if d.Audit != nil {
		var end func(result.Result)
		ctx, end = d.Audit(ctx, args)
		defer func() { end(res) }()
	}
	base := result.Result{Session: args.Session, Servers: args.Servers, TimeoutSeconds: args.Timeout}
	fail := func(err error) result.Result {
		base.Status, base.Error = result.StatusError, err.Error()
		return base
	}
	if err := d.Discovery.Check(ctx); err != nil {
		return fail(err)
	}
	cat := d.Router.Snapshot() // one catalog for the grants and the discovered names
	servers, notes, err := d.Router.Resolve(ctx, cat, args.Servers)
	if err != nil {
		return fail(err)
	}
	s, err := d.Sessions.Get(ctx, SessionKey(PrincipalFrom(ctx), args.Session))
	if err != nil {
		return fail(err)
	}
	timeout := time.Duration(args.Timeout) * time.Second
	req := &ExecRequest{
		Ctx: ctx, Code: args.Code, Servers: servers, Timeout: timeout,
		Deadline: queued.Add(timeout), MaxTimeout: d.MaxTimeout, Reply: make(chan result.Result, 1),
		Discovered: cat.Names(),
	}
	if !s.Exec(ctx, req) {
		return fail(ctx.Err())
	}
	select {
	case r := <-req.Reply:
		r.Notes = append(notes, r.Notes...)
		return r
	case <-ctx.Done():
		return fail(fmt.Errorf("cancelled: %w", ctx.Err()))
	}
}
