package actors

// approve.go is the approval gate: before a tool call the policy gates
// (approve globs, approveDestructive) goes upstream, the human behind the
// run_python call is asked through elicitation, and the cell waits, live,
// for the answer. Nothing is sent upstream unless the answer is once or run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
)

// DefaultApprovalTimeout bounds the wait for a human's answer
// (MCP_BRIDGE_APPROVAL_TIMEOUT).
const DefaultApprovalTimeout = 120 * time.Second

// maxPreview bounds the argument preview an approval form shows.
const maxPreview = 400

// The decisions of an approval form.
const (
	decisionOnce = "once"
	decisionRun  = "run"
	decisionDeny = "deny"
)

// approvals is one run_python call's approval state: who to ask, what the
// human approved for the rest of the call ("run"), and how long the call
// waited for answers, which moves its deadline (the wait for a human is
// not the cell's time).
type approvals struct {
	human Human
	// turn lets one form at a time reach the human per call: concurrent
	// gated calls queue, and a "run" answer covers the ones behind it.
	turn    chan struct{}
	mu      sync.Mutex
	granted map[string]bool // server + "\x00" + tool
	signIns map[string]bool // servers whose sign-in this call tried (signin.go)
	waiting atomic.Int32
	paused  atomic.Int64 // nanoseconds spent waiting for answers
	// decisions counts the call's logged decisions (maxLoggedDecisions).
	decisions atomic.Int64
	// relayed counts the upstream elicitations put to the human in this
	// call (relay.go: MaxInputRounds).
	relayed atomic.Int32
}

// maxLoggedDecisions bounds the approval decisions of one call logged at
// info level.
const maxLoggedDecisions = 16

// unlogged is how many of the call's decisions were not logged at info.
func (a *approvals) unlogged() int64 {
	if a == nil {
		return 0
	}
	return max(a.decisions.Load()-maxLoggedDecisions, 0)
}

func newApprovals(h Human) *approvals {
	return &approvals{human: h, turn: make(chan struct{}, 1)}
}

func (a *approvals) isGranted(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.granted[key]
}

func (a *approvals) grant(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.granted == nil {
		a.granted = map[string]bool{}
	}
	a.granted[key] = true
}

// pausedFor is the time the call waited for answers so far.
func (a *approvals) pausedFor() time.Duration {
	if a == nil {
		return 0
	}
	return time.Duration(a.paused.Load())
}

// moved is the call's deadline once the waits for answers are added, and
// whether the deadline has not come yet: while a form is open it never
// comes (the next check is a moment later).
func (a *approvals) moved(deadline time.Time) (time.Time, bool) {
	if a == nil {
		return deadline, false
	}
	if a.waiting.Load() > 0 {
		return time.Now().Add(50 * time.Millisecond), true
	}
	d := deadline.Add(a.pausedFor())
	return d, time.Until(d) > 0
}

// humanSource gives a tool call the approval state of the call it is
// made for: the active call's own, or for a job the call that collects it.
type humanSource interface {
	approvals(ctx context.Context) (*approvals, error)
	// current is the approval state of the call active now; nil when none.
	current() *approvals
	// note adds a note to the result of the call active now.
	note(msg string)
}

func (a *activeCall) approvals(context.Context) (*approvals, error) { return a.asks, nil }
func (a *activeCall) current() *approvals                           { return a.asks }

// maxNotes bounds the notes relays add to one result.
const maxNotes = 8

func (a *activeCall) note(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.notes {
		if n == msg {
			return
		}
	}
	if len(a.notes) < maxNotes {
		a.notes = append(a.notes, msg)
	}
}

// takeNotes returns the notes added so far.
func (a *activeCall) takeNotes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.notes...)
}

func (j jobSink) current() *approvals {
	if a := j.s.active.Load(); a != nil {
		return a.asks
	}
	return nil
}

func (j jobSink) note(msg string) {
	if a := j.s.active.Load(); a != nil {
		a.note(msg)
	}
}

// approvals of a job's call is the active call's; while none is active it
// waits for the next one (the call that collects the job), as long as the
// sandbox lives.
func (j jobSink) approvals(ctx context.Context) (*approvals, error) {
	for {
		ch := j.s.activeChanged()
		if a := j.s.active.Load(); a != nil {
			return a.asks, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// approvalForm is the form of one gated call: one required field without
// a default, so a client that auto-accepts empty forms cannot approve it.
func approvalForm(server, tool string, args json.RawMessage) mcp.ElicitationRequest {
	preview := argsPreview(args, maxPreview)
	msg := printable.String(fmt.Sprintf("Approve the tool call %s.%s?\nArguments: %s\n"+
		"once: this call only; run: %s.%s for the rest of this run_python call; deny: refuse it (nothing is sent to %s).",
		server, tool, preview, server, tool, server))
	return mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{
					"type":        "string",
					"title":       "Decision",
					"description": "once, run or deny",
					"enum":        []string{decisionOnce, decisionRun, decisionDeny},
				},
			},
			"required": []string{"decision"},
		},
	}}
}

// deniedError is the MCPError (kind denied) a refused gated call raises.
func deniedError(msg string) error {
	return LinkError(protocol.CodeDenied, protocol.KindDenied, msg)
}

// approve asks the human whether server.tool may be called with args; nil
// means it may. Any answer but once or run, an error, or no answer within
// the approval timeout refuses it; so does a client that cannot be asked
// (fail closed). Every decision is logged, never the arguments.
//
// rule names what gated the call ("approve in servers.memory of
// /path/bridge.policy"), for the refusals that tell the operator what to
// change.
func (r *Router) approve(ctx context.Context, scope Scope, server, tool, rule string, args json.RawMessage) error {
	key := server + "\x00" + tool
	// Decisions are logged at info, the first maxLoggedDecisions of a
	// call each; a loop in the cell against a client that answers at once
	// must not flood the log, so the rest go to debug level and the call
	// logs their count when it ends. A refusal for want of a client is
	// logged once a call and then counted (Scope.Refused); a call a "run"
	// answer covers is logged at debug level.
	var asks *approvals
	var span trace.Span // the wait's, once the human is asked
	logDecision := func(decision string) {
		if span != nil {
			span.SetAttributes(attrDecision.String(decision))
		}
		if scope.recorder != nil {
			scope.recorder.Approval(server, tool, decision)
		}
		ev := r.Log.Info()
		switch {
		case decision == "unavailable":
			if !firstRefusal(scope) {
				return
			}
		case decision == "run (approved earlier in this call)":
			ev = r.Log.Debug()
		case asks != nil && asks.decisions.Add(1) > maxLoggedDecisions:
			ev = r.Log.Debug()
		}
		scope.log(ev).Str("server", server).Str("tool", printable.Log(tool)).Str("decision", decision).Msg("approval")
	}
	if scope.human != nil {
		var err error
		if asks, err = scope.human.approvals(ctx); err != nil {
			logDecision("unavailable")
			return deniedError(fmt.Sprintf("Tool %s.%s needs approval, and no call came to ask it: %v", server, tool, err))
		}
	}
	if asks != nil && asks.isGranted(key) {
		logDecision("run (approved earlier in this call)")
		return nil
	}
	if asks == nil || asks.human == nil {
		logDecision("unavailable")
		return deniedError(fmt.Sprintf("Tool %s.%s needs approval (gated by %s), and this call has no client to ask; to call it without one, %s",
			server, tool, rule, ungate(rule)))
	}
	if caps := asks.human.Caps(); !caps.Form {
		logDecision("unavailable")
		return deniedError(fmt.Sprintf("Tool %s.%s needs a human's approval (gated by %s), but %s: "+
			"use an MCP client with elicitation, or %s", server, tool, rule, caps.Missing, ungate(rule)))
	}
	timeout := r.ApprovalTimeout
	if timeout <= 0 {
		timeout = DefaultApprovalTimeout
	}
	ctx, span = tracer.Start(ctx, "approval "+server+"."+tool, trace.WithAttributes(attrServer.String(server), attrToolName.String(tool)))
	defer span.End()
	asks.waiting.Add(1)
	start := time.Now()
	defer func() {
		asks.paused.Add(int64(time.Since(start)))
		asks.waiting.Add(-1)
	}()
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	noAnswer := func() error {
		logDecision("timeout")
		return deniedError(fmt.Sprintf("Tool %s.%s was not approved: no answer within %ds (MCP_BRIDGE_APPROVAL_TIMEOUT)", server, tool, int(timeout/time.Second)))
	}
	select {
	case asks.turn <- struct{}{}:
		defer func() { <-asks.turn }()
	case <-wait.Done():
		return noAnswer()
	}
	if asks.isGranted(key) { // a "run" answer came while this call queued
		logDecision("run (approved earlier in this call)")
		return nil
	}
	res, err := asks.human.Elicit(wait, approvalForm(server, tool, args))
	decision := answer(res, err)
	switch {
	case decision == decisionOnce:
	case decision == decisionRun:
		asks.grant(key)
	case errors.Is(wait.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		// The client's request carries the same deadline: either may end first.
		return noAnswer()
	case err != nil:
		logDecision("error")
		r.Log.Debug().Err(err).Msg("approval request failed")
		return deniedError(fmt.Sprintf("Tool %s.%s was not approved: the approval request failed: %s", server, tool, printable.String(clip(err.Error(), 200))))
	default:
		logDecision(decision)
		return deniedError(fmt.Sprintf("Tool %s.%s was denied by the user (%s); nothing was sent to %s", server, tool, decision, server))
	}
	logDecision(decision)
	return nil
}

// ungate is the change to the policy that lifts the gate rule names:
// approve wins over allow, so allowing the tool does not.
func ungate(rule string) string {
	if strings.HasPrefix(rule, "approveDestructive") {
		return "set that approveDestructive to false"
	}
	return "take the tool out of that approve list (allow does not lift it)"
}

// answer reads an approval form's answer: once, run or deny; for a decline
// or cancel, that action; "" when there is none.
func answer(res *mcp.ElicitationResult, err error) string {
	if err != nil || res == nil {
		return ""
	}
	switch res.Action {
	case mcp.ElicitationResponseActionAccept:
	case mcp.ElicitationResponseActionDecline, mcp.ElicitationResponseActionCancel:
		return string(res.Action)
	default:
		return decisionDeny
	}
	content, _ := res.Content.(map[string]any)
	switch d, _ := content["decision"].(string); d {
	case decisionOnce, decisionRun:
		return d
	default:
		return decisionDeny
	}
}
