package actors

// frontinput.go serves run_python to a client that negotiated protocol
// 2026-07-28, which cannot be sent elicitation/create: a question of the
// call (an approval form, or an upstream's relayed elicitation) ends the
// MCP request with an input_required result and a requestState, while the
// call stays held, live in its container, its inner call waiting. The
// client's retry (same arguments, the answer, the requestState) answers
// the question and re-attaches to the same call, which goes on; nothing is
// run twice. The call runs on a context of its own, which the attached
// request's end cancels (as it does a legacy call) and which the table
// cancels when no retry comes in time.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// heldCall is one run_python call of a 2026-07-28 client: it runs apart
// from the request that started it and lives across its retries.
type heldCall struct {
	bind   inputBinding
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once res is set
	res    result.Result
	// questions holds the call's next question until a request is attached
	// to hand it to the client; turn lets one question at a time out.
	questions chan *question
	turn      chan struct{}
	rounds    atomic.Int32
	progress  atomic.Pointer[ProgressFunc] // the attached request's; nil when none
	caps      atomic.Pointer[HumanCaps]    // declared by the newest request
}

// question is one input request of a held call and its answer.
type question struct {
	key    string
	req    mcp.InputRequest
	answer chan inputAnswer // buffered: the answer never waits
	gone   chan struct{}    // closed when the asker stopped waiting
	once   sync.Once
}

type inputAnswer struct {
	resp mcp.InputResponse
	err  error
}

func (q *question) withdraw() { q.once.Do(func() { close(q.gone) }) }

func (q *question) isGone() bool {
	select {
	case <-q.gone:
		return true
	default:
		return false
	}
}

func (q *question) reply(a inputAnswer) {
	select {
	case q.answer <- a:
	default: // answered already
	}
}

// errNoRetry ends a held call whose client did not retry in time.
var errNoRetry = errors.New("no retry with the requestState came within MCP_BRIDGE_APPROVAL_TIMEOUT")

// ask hands ir to the client through the next input_required result and
// waits for the retry's answer, within ctx.
func (hc *heldCall) ask(ctx context.Context, ir mcp.InputRequest) (mcp.InputResponse, error) {
	select {
	case hc.turn <- struct{}{}:
	case <-ctx.Done():
		return mcp.InputResponse{}, context.Cause(ctx)
	}
	defer func() { <-hc.turn }()
	n := hc.rounds.Add(1)
	if n > MaxInputRounds {
		return mcp.InputResponse{}, fmt.Errorf("this run_python call asked its client for input %d times, the cap (answer run to approve a tool for the rest of the call)", MaxInputRounds)
	}
	q := &question{key: fmt.Sprintf("q%d", n), req: ir, answer: make(chan inputAnswer, 1), gone: make(chan struct{})}
	defer func() {
		q.withdraw()
		select { // it may still wait to be handed out: only this asker's can
		case <-hc.questions:
		default:
		}
	}()
	select {
	case hc.questions <- q:
	case <-ctx.Done():
		return mcp.InputResponse{}, context.Cause(ctx)
	}
	select {
	case a := <-q.answer:
		return a.resp, a.err
	case <-ctx.Done():
		return mcp.InputResponse{}, context.Cause(ctx)
	}
}

// inputHuman asks the client of a held call through input_required rounds.
type inputHuman struct{ hc *heldCall }

func (h inputHuman) Caps() HumanCaps {
	if c := h.hc.caps.Load(); c != nil {
		return *c
	}
	return CapsOf(mcp.ClientCapabilities{})
}

func (h inputHuman) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	resp, err := h.hc.ask(ctx, mcp.NewElicitationInputRequest(req.Params))
	if err != nil {
		return nil, err
	}
	if err := resp.DecodeFor(mcp.MethodElicitationCreate); err != nil || resp.Elicitation == nil {
		return nil, errors.New("the retry carried no answer to the form")
	}
	return resp.Elicitation, nil
}

func (h inputHuman) Sample(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	resp, err := h.hc.ask(ctx, mcp.NewSamplingInputRequest(req.CreateMessageParams))
	if err != nil {
		return nil, err
	}
	if err := resp.DecodeFor(mcp.MethodSamplingCreateMessage); err != nil || resp.Sampling == nil {
		return nil, errors.New("the retry carried no answer to the sampling request")
	}
	return resp.Sampling, nil
}

// modernRequest is the protocol info of a request that declared 2026-07-28
// or later; nil for the legacy ones.
func modernRequest(ctx context.Context) *server.RequestProtocolInfo {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return info
	}
	return nil
}

// declareModern passes the capabilities a 2026-07-28 request declared to
// OnInitialize: that revision has no initialize, so its server/discover
// (or, failing that, its first call) gives the set declared upstream.
func declareModern(ctx context.Context, cfg FrontConfig) {
	if info := modernRequest(ctx); info != nil && info.ClientCapabilities != nil && cfg.OnInitialize != nil {
		cfg.OnInitialize(*info.ClientCapabilities)
	}
}

// callToolModern runs or resumes the run_python call of a 2026-07-28
// request. run is the dispatcher's (or bridge serve's) Run.
func (f *Front) callToolModern(ctx context.Context, req mcp.CallToolRequest, raw json.RawMessage, info *server.RequestProtocolInfo,
	run func(context.Context, json.RawMessage) result.Result) *mcp.CallToolResult {
	var caps mcp.ClientCapabilities
	if info.ClientCapabilities != nil {
		caps = *info.ClientCapabilities
	}
	declareModern(ctx, f.cfg)
	invalid := func(msg string) *mcp.CallToolResult {
		return f.shape(ctx, f.cfg.Render(result.Result{Status: result.StatusValidation, Error: msg, Session: result.DefaultSession}))
	}
	var mcpSession string
	if s := server.ClientSessionFromContext(ctx); s != nil {
		mcpSession = s.SessionID()
	}
	bind := bindingOf(PrincipalFrom(ctx), mcpSession, raw)
	c := CapsOf(caps)
	var hc *heldCall
	if state := req.Params.RequestState; state != "" {
		h, err := f.inputs.take(state, bind, f.approvalTimeout())
		if err != nil {
			return invalid(err.Error())
		}
		hc = h.call
		hc.caps.Store(&c)
		f.attachProgress(ctx, req, hc)
		resp, ok := req.Params.InputResponses[h.q.key]
		if !ok {
			h.q.reply(inputAnswer{err: fmt.Errorf("the retry carried no answer for %q", h.q.key)})
		} else {
			h.q.reply(inputAnswer{resp: resp})
		}
	} else if len(req.Params.InputResponses) > 0 {
		return invalid("inputResponses came without the requestState they answer; send both, as the input_required result gave them")
	} else {
		hc = &heldCall{bind: bind, done: make(chan struct{}), questions: make(chan *question, 1), turn: make(chan struct{}, 1)}
		hc.caps.Store(&c)
		f.attachProgress(ctx, req, hc)
		f.startHeld(ctx, raw, hc, run)
	}
	defer hc.progress.Store(nil)
	return f.await(ctx, hc)
}

// attachProgress sends the call's progress to the request of ctx.
func (f *Front) attachProgress(ctx context.Context, req mcp.CallToolRequest, hc *heldCall) {
	if meta := req.Params.Meta; meta != nil && meta.ProgressToken != nil {
		p := f.progressSender(ctx, meta.ProgressToken)
		hc.progress.Store(&p)
	}
}

// startHeld starts hc on a context of its own, keeping the values of the
// request's (principal, MCP session) but not its end.
func (f *Front) startHeld(ctx context.Context, raw json.RawMessage, hc *heldCall, run func(context.Context, json.RawMessage) result.Result) {
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	hc.cancel = cancel
	cctx = WithHuman(cctx, inputHuman{hc})
	cctx = WithProgress(cctx, func(n int, msg string) {
		if p := hc.progress.Load(); p != nil {
			(*p)(n, msg)
		}
	})
	f.heldMu.Lock()
	defer f.heldMu.Unlock()
	if f.heldClosed {
		cancel(nil)
		hc.res = result.Result{Status: result.StatusError, Error: "the bridge is shutting down", Session: result.DefaultSession}
		close(hc.done)
		return
	}
	f.heldCalls[hc] = struct{}{}
	f.heldWG.Add(1)
	go func() {
		defer f.heldWG.Done()
		defer cancel(nil)
		defer func() {
			close(hc.done)
			f.heldMu.Lock()
			delete(f.heldCalls, hc)
			f.heldMu.Unlock()
		}()
		// The call runs here, not on the request's goroutine, where mcp-go's
		// server would recover a panic: it ends this call only.
		defer guard(f.cfg.Log, "a held run_python call", func(any) {
			hc.res = result.Result{Status: result.StatusError, Error: "internal error in the bridge (see its log); retry the call", Session: result.DefaultSession}
		})
		hc.res = run(cctx, raw)
	}()
}

// await waits, attached to the request of ctx, for the call's result or
// its next question, which it hands to the client as input_required.
func (f *Front) await(ctx context.Context, hc *heldCall) *mcp.CallToolResult {
	for {
		select {
		case <-hc.done:
			return f.shape(ctx, f.cfg.Render(hc.res))
		case q := <-hc.questions:
			if q.isGone() {
				continue
			}
			state, err := f.inputs.issue(hc.bind, hc, q, f.approvalTimeout(), func() { hc.cancel(errNoRetry) })
			if err != nil {
				q.reply(inputAnswer{err: err})
				continue
			}
			b := server.NewInputRequestBuilder(state)
			switch {
			case q.req.Elicitation != nil:
				b.Elicit(q.key, *q.req.Elicitation)
			case q.req.Sampling != nil:
				b.Sample(q.key, *q.req.Sampling)
			}
			return b.ToolResult()
		case <-ctx.Done():
			// The client cancelled or left: the call is interrupted, as a
			// legacy call is when its request ends.
			hc.cancel(context.Cause(ctx))
			return f.shape(ctx, f.cfg.Render(result.Result{Status: result.StatusError, Error: "cancelled", Session: result.DefaultSession}))
		}
	}
}

func (f *Front) approvalTimeout() time.Duration {
	if d := f.cfg.Dispatcher; d != nil && d.Router != nil && d.Router.ApprovalTimeout > 0 {
		return d.Router.ApprovalTimeout
	}
	return DefaultApprovalTimeout
}

// Close drops every requestState, interrupts the held calls and waits for
// them; new 2026-07-28 calls are refused after it.
func (f *Front) Close() {
	f.inputs.close()
	f.heldMu.Lock()
	f.heldClosed = true
	for hc := range f.heldCalls {
		hc.cancel(errors.New("the bridge is shutting down"))
	}
	f.heldMu.Unlock()
	f.heldWG.Wait()
}
