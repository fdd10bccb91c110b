package actors

// call.go runs one run_python call on a session's sandbox: acquiring a
// ready sandbox, the exec, its deadlines (TMO-1, TMO-2) and the result.
// session.go is the actor that queues calls and owns the sandbox between
// them.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"go.opentelemetry.io/otel/trace"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// exitOOMKilled is the exit code of a sandbox whose worker the kernel's OOM
// killer ended, as the supervisor tells it from the container cgroup's
// oom_kill counter (entrypoint/supervisor.py OOM_EXIT). Every other code,
// 137 included (an external SIGKILL), is reported as the exit code it is.
const exitOOMKilled = 99

// lossInternal is the loss reason of a sandbox ended after a panic in one
// of its link's handlers (sandbox.fail).
const lossInternal = "internal error in the bridge"

// exitReason is the loss reason of an exited sandbox.
func exitReason(sb *sandbox) string {
	switch code := sb.exitCode(); {
	case sb.linkStalled():
		return "link stalled"
	case sb.linkBroken():
		return lossInternal
	case code == exitOOMKilled:
		return "memory limit exceeded"
	}
	// A backend that knows more than the code says so (a Kubernetes pod
	// that was deleted or evicted, or whose attach dropped).
	if r, ok := sb.box.(interface{ ExitReason() string }); ok && r.ExitReason() != "" {
		return r.ExitReason()
	}
	return fmt.Sprintf("sandbox exited with code %d", sb.exitCode())
}

// capField cuts *s to at most n bytes on a rune boundary, with a marker
// saying how much the host cut; it reports whether it cut.
func capField(s *string, n int) bool {
	if len(*s) <= n {
		return false
	}
	*s = clip(*s, n)
	return true
}

// acquire returns a ready sandbox: the current one, else the spare, else a
// new one, and the loss to report when the current one had died. The start
// is bounded by the start timeout.
func (s *Session) acquire(ctx context.Context, sb *sandbox) (_ *sandbox, loss string, err error) {
	if sb != nil {
		if sb.alive() {
			return sb, "", nil
		}
		loss = exitReason(sb)
		sb.close()
	}
	sb, err = s.start(ctx)
	return sb, loss, err
}

// acquireTraced is acquire, with a "sandbox start" span under the call's
// span parent when it starts one.
func (s *Session) acquireTraced(ctx context.Context, sb *sandbox, parent trace.Span) (*sandbox, string, error) {
	if !parent.IsRecording() || (sb != nil && sb.alive()) {
		return s.acquire(ctx, sb)
	}
	ctx, span := tracer.Start(trace.ContextWithSpan(ctx, parent), "sandbox start", trace.WithAttributes(attrSession.String(s.name)))
	got, loss, err := s.acquire(ctx, sb)
	if loss != "" {
		span.SetAttributes(attrReplaced.String(strings.ToValidUTF8(loss, "\uFFFD"))) // OTLP refuses other strings
	}
	endSpan(span, err, "start")
	return got, loss, err
}

// start returns a new ready sandbox, the spare first when there is one. A
// spare that failed is not the session's failure (it may have started at a
// bad moment, e.g. while a fork bomb's container was torn down under a
// shared RLIMIT_NPROC): a fresh sandbox is started instead. A fresh start
// is tried twice when the launcher asks for a retry.
func (s *Session) start(ctx context.Context) (*sandbox, error) {
	if s.spares != nil {
		if sb := s.spares.takeSpare(ctx); sb != nil {
			trace.SpanFromContext(ctx).SetAttributes(attrSpare.Bool(true))
			_, err := sb.waitReady(ctx)
			if err == nil {
				return sb, nil
			}
			sb.close()
			if ctx.Err() != nil {
				return nil, err
			}
			s.log.Debug().Err(err).Msg("spare failed; starting a fresh sandbox")
		}
	}
	for attempt := 0; attempt < 2; attempt++ {
		sb, err := startSandbox(s.cfg, boxLabel(s.key))
		if err != nil {
			return nil, err
		}
		retry, err := sb.waitReady(ctx)
		if err == nil {
			return sb, nil
		}
		sb.close()
		if !retry {
			return nil, err
		}
	}
	return nil, errors.New("sandbox did not start after a retry")
}

// runCall runs one call from start to result, as call number n; loss is a
// state loss not yet reported. It runs on its own goroutine, owns sb for the
// duration and touches no field of s that Serve owns.
func (s *Session) runCall(ctx context.Context, sb *sandbox, req *ExecRequest, n int64, loss string) callDone {
	start := time.Now()
	t := int(req.Timeout / time.Second)
	res := result.Result{Session: s.name, TimeoutSeconds: t}
	for _, srv := range req.Servers {
		res.Servers = append(res.Servers, srv.Name)
	}
	var call *activeCall
	finish := func(r result.Result, sb *sandbox, reset bool) callDone {
		if call != nil {
			r.Notes = append(r.Notes, call.takeNotes()...)
		}
		if loss != "" && !r.StateLost {
			r.StateLost, r.LossReason = true, loss
		}
		r.DurationMs = time.Since(start).Milliseconds()
		return callDone{result: r, sb: sb, reset: reset}
	}

	// The start of a container counts against the start timeout only
	// (TMO-1): the call's deadline moves by the time the start took.
	acquired := time.Now()
	sb, prior, err := s.acquireTraced(ctx, sb, trace.SpanFromContext(req.Ctx))
	callDeadline := req.Deadline.Add(time.Since(acquired))
	if prior != "" {
		loss = prior
	}
	if err != nil {
		res.Status, res.Error = result.StatusError, err.Error()
		return finish(res, nil, false)
	}
	s.weighFor(sb)
	if sb.snap.owner.Load() == nil {
		o := &snapOwner{principal: s.principal, name: s.name}
		if s.spares != nil {
			o.exists = s.spares.Live
		}
		sb.snap.owner.Store(o)
	}
	restore, refused := s.offerRestore(sb, loss)
	defer sb.closeRestore()
	call = &activeCall{
		scope: Scope{Session: s.name, Principal: s.principal, Call: n, Servers: res.Servers, Deadline: callDeadline, ToolCalls: new(atomic.Int64), Refused: new(atomic.Int64),
			recorder: RecorderFrom(req.Ctx), span: trace.SpanFromContext(req.Ctx)},
		limit: 2*s.cfg.MaxOutput + 1024,
		media: newMedia(s.cfg.Boot.Limits),
		asks:  newApprovals(HumanFrom(req.Ctx)),
	}
	if call.scope.recorder != nil {
		call.scope.recorder.Numbered(n)
	}
	trace.SpanFromContext(req.Ctx).SetAttributes(attrCall.Int64(n))
	callCtx, endCall := context.WithCancelCause(sb.life)
	call.ctx = callCtx
	defer endCall(errCallEnded)
	sb.setActive(call)
	defer sb.reportDrops(n) // after the call is no longer active: what came in it is counted
	defer func() {
		if k := call.scope.Refused.Load(); k > 1 {
			s.log.Warn().Int64("call", n).Int64("refused", k).Msg("the policy refused tool calls of this call; the first is logged above")
		}
		if k := call.asks.unlogged(); k > 0 {
			s.log.Info().Int64("call", n).Int64("decisions", k).Msg("more approval decisions in this call (logged at debug level)")
		}
	}()
	defer sb.setActive(nil)
	progress := progressFrom(req.Ctx)
	if progress != nil {
		defer call.streamProgress(progress)()
	}

	got, timedOut, hardKill := s.await(ctx, sb, call, req, restore, progress != nil, callDeadline)
	if refused != "" {
		res.Notes = append(res.Notes, refused)
	}
	if isStaleServers(got.err) && !timedOut && !hardKill {
		// The worker lacked a server entry the frame named by digest, and
		// ran nothing: once more, in full. (A cell can forge this reply to
		// its own exec frame, which then runs it again, within the same
		// call's deadline and caps: no more than the cell could do itself.)
		sb.kept.forget()
		got, timedOut, hardKill = s.await(ctx, sb, call, req, restore, progress != nil, callDeadline)
	}
	if restore != nil && got.err == nil && restoredNote(got.r.Notes, s.name) {
		// The state came back: the note says from when, and why the
		// sandbox was replaced. (A cell could forge the note; it would
		// only hide a loss notice from its own caller.)
		loss = ""
	}
	if got.err == nil {
		sb.addOutput(call, got.r.Output)
	}
	output, truncated, reset := call.snapshot()
	res.Output = output
	res.Images, res.ImageNotes = call.images(got.r.Saved)
	if got.err == nil {
		s.replied(&res, got.r, truncated, timedOut)
		if res.Status == result.StatusTimeout {
			res.Error = timeoutError(res.TimeoutSeconds, req.MaxTimeout, false, false, loss != "", call.during)
		}
		return finish(res, sb, reset || got.r.Reset)
	}
	// The exec frame never left: it is over the frame cap (the code plus
	// the granted servers' tool lists). The sandbox is untouched.
	if errors.Is(got.err, protocol.ErrFrameTooLarge) {
		res.Status = result.StatusError
		res.Error = fmt.Sprintf("The code and the tool lists of the servers it may call do not fit in one frame: %v (MCP_BRIDGE_MAX_FRAME_BYTES); send less code or fewer servers", got.err)
		return finish(res, sb, false)
	}
	s.linkLost(&res, sb, got.err, timedOut || hardKill)
	if st := s.cfg.Snapshots; st != nil {
		// This call's state is lost: the restore's note counts it
		// ("restored to call 1 of 2"). A call that ends well records
		// itself when its snapshot starts (snapshot_begin).
		if err := st.SetLastCall(s.principal, s.name, n); err != nil {
			s.log.Debug().Err(err).Msg("snapshot: last call not recorded")
		}
	}
	if res.Status == result.StatusTimeout {
		res.Error = timeoutError(res.TimeoutSeconds, req.MaxTimeout, true, s.cfg.Durability == DurabilityCell, false, call.during)
	}
	return finish(res, nil, false)
}

// timeoutError is the error of a call its deadline ended (TMO-3's text
// first), on one line that gives the next step: the tool calls in flight
// when the deadline passed, whether the session kept its state (lost: the
// cell ignored the interrupt and its container was replaced; earlier: an
// earlier loss this result reports, so what is kept is this call's state
// only), how high timeout may go (maxTimeout, MCP_BRIDGE_MAX_TIMEOUT; 0:
// not known) and runtime.start for work longer than that.
func timeoutError(t, maxTimeout int, lost, durable, earlier bool, during []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Execution timed out after %ds", t)
	atCeiling := maxTimeout > 0 && t >= maxTimeout
	if atCeiling {
		b.WriteString(" (the most MCP_BRIDGE_MAX_TIMEOUT allows)")
	}
	if len(during) > 0 {
		what := "the tool call "
		if len(during) > 1 {
			what = "the tool calls "
		}
		b.WriteString(" during " + what + joinNames(during, maxNamedCalls))
	}
	switch {
	case lost && durable:
		b.WriteString("; the cell ignored the interrupt, so the session was restarted: what it built since its last snapshot is lost, and the next call restores that snapshot")
	case lost:
		b.WriteString("; the cell ignored the interrupt, so the session was restarted and its state is lost")
	case earlier:
		b.WriteString("; the session kept the state this call built")
	default:
		b.WriteString("; the session kept its state")
	}
	const background = "start it in the background: job = runtime.start(code), then runtime.result(job) in later calls"
	switch {
	case atCeiling:
		b.WriteString(". For longer work, " + background)
	case maxTimeout > 0:
		fmt.Fprintf(&b, ". For longer work, pass a larger timeout (at most %d, MCP_BRIDGE_MAX_TIMEOUT) or %s", maxTimeout, background)
	default:
		b.WriteString(". For longer work, pass a larger timeout or " + background)
	}
	b.WriteString(".")
	return b.String()
}

// maxNamedCalls bounds the tool calls a timeout's error names.
const maxNamedCalls = 3

// joinNames is names as "a", "a and b", "a, b and c", the ones past n
// counted: "a, b, c and 2 more".
func joinNames(names []string, n int) string {
	if len(names) > n {
		names = append(names[:n:n], fmt.Sprintf("%d more", len(names)-n))
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// savedToolsInline is the largest saved-tools reply sent with a sandbox's
// first exec frame: larger sets are fetched by the worker, so they never
// push that frame (code, granted servers' tool lists) over the frame cap.
const savedToolsInline = 256 << 10

// execID is a fresh exec frame id: random, so a cell that writes forged
// replies to the link (its descriptors are the cell's too) cannot answer a
// call after its own; the current call's id it can learn, and a forged
// reply to it only ends that call with what the code claims.
func execID() jsonrpc2.ID {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return jsonrpc2.ID{Str: "exec-" + hex.EncodeToString(b[:]), IsString: true}
}

// execReply is the sandbox's reply to an exec frame, or why none came.
type execReply struct {
	r   protocol.ExecResult
	err error
}

// execReplyOf decodes the reply resp as jsonrpc2's Call would: its error,
// else its result.
func execReplyOf(resp *jsonrpc2.Response) (got execReply) {
	switch {
	case resp.Error != nil:
		got.err = resp.Error
	case resp.Result != nil:
		got.err = json.Unmarshal(*resp.Result, &got.r)
	}
	return got
}

// await sends the exec frame and waits for its reply. The call's deadline,
// its caller's cancellation and the bridge's shutdown interrupt the cell;
// a cell that ignores the interrupt for interruptGrace has its container
// killed (TMO-2). timedOut says the deadline passed; hardKill that the
// container was killed.
func (s *Session) await(ctx context.Context, sb *sandbox, call *activeCall, req *ExecRequest, restore *protocol.RestoreParams, progress bool, callDeadline time.Time) (got execReply, timedOut, hardKill bool) {
	params := protocol.ExecParams{
		Call: call.scope.Call, Code: req.Code, Servers: sb.kept.frame(req.Servers), OutputLimit: s.cfg.MaxOutput,
		Progress:   progress,
		Discovered: req.Discovered,
		Restore:    restore,
	}
	if sb.firstExec.CompareAndSwap(false, true) && s.cfg.Router != nil {
		// The worker loads the saved tools before its first cell. A store
		// error, or a set too large to ride along (over savedToolsInline, or
		// pushing the frame over the cap: sent again without it), is left
		// for the worker's own request, whose reply has a frame of its own.
		if tools, err := s.cfg.Router.ServeSandbox(req.Ctx, call.scope, protocol.MethodSavedTools, nil); err == nil {
			if raw, err := json.Marshal(tools); err == nil && len(raw) <= savedToolsInline {
				params.SavedTools = json.RawMessage(raw)
			}
		}
	}
	// The exec frame is sent here, and its reply comes from the link's
	// reader (onRecv) into this loop: no goroutine per call.
	id := execID()
	_, err := sb.conn.DispatchCall(context.Background(), protocol.MethodExec, params, jsonrpc2.PickID(id))
	if errors.Is(err, protocol.ErrFrameTooLarge) && params.SavedTools != nil {
		// The frame never left: without the saved tools it may fit.
		params.SavedTools = nil
		id = execID()
		_, err = sb.conn.DispatchCall(context.Background(), protocol.MethodExec, params, jsonrpc2.PickID(id))
	}
	sent := err == nil
	if sent {
		sb.kept.sent(req.Servers)
	} else {
		got.err = err
	}
	replies, lost := sb.execReplies, sb.conn.DisconnectNotify()

	deadline := time.NewTimer(time.Until(callDeadline))
	defer deadline.Stop()
	var (
		grace, linger      <-chan time.Time
		cancelC, shutdownC = req.Ctx.Done(), ctx.Done()
		exitedC            = sb.exited
		killed             chan struct{} // closed when the hard kill is done
	)
	interrupt := func() {
		if grace == nil && !hardKill {
			sb.interrupt(call.scope.Call)
			grace = time.After(interruptGrace)
		}
	}
wait:
	for sent {
		select {
		case resp := <-replies:
			if resp.ID != id {
				continue // cannot be: one exec at a time per sandbox
			}
			got = execReplyOf(resp)
			break wait
		case <-lost:
			// The reader hands over a reply before it closes the link.
			select {
			case resp := <-replies:
				got = execReplyOf(resp)
			default:
				got.err = jsonrpc2.ErrClosed
			}
			break wait
		case <-deadline.C:
			// The waits for a human's approval are not the cell's time.
			if next, ok := call.asks.moved(callDeadline); ok {
				deadline.Reset(time.Until(next))
				continue
			}
			timedOut = true
			call.during = call.inFlight()
			interrupt()
		case <-cancelC:
			cancelC = nil
			interrupt()
		case <-shutdownC:
			shutdownC = nil
			interrupt()
		case <-grace:
			grace = nil
			hardKill = true
			s.log.Warn().Int64("call", call.scope.Call).Msg("cell ignored the interrupt; replacing the container")
			// The kill runs beside this loop, which keeps collecting frames;
			// it is waited for below.
			killed = make(chan struct{})
			go func() {
				defer close(killed)
				sb.kill()
			}()
		case <-exitedC:
			// Frames written before the exit may still be in the pipe: give
			// the reader a moment before closing the link.
			exitedC = nil
			linger = time.After(300 * time.Millisecond)
		case <-linger:
			linger = nil
			_ = sb.conn.Close()
		}
	}
	if killed != nil {
		<-killed
	}
	sb.markServed()
	return got, timedOut, hardKill
}

// replied fills res from the sandbox's exec reply. The reply may be forged
// by user code: every field it carries is capped here, whatever the
// sandbox's own caps did (TRN-3).
func (s *Session) replied(res *result.Result, r protocol.ExecResult, truncated, timedOut bool) {
	cut := capField(&r.Error, s.cfg.MaxOutput)
	if r.Result != nil {
		v := *r.Result
		cut = capField(&v, s.cfg.MaxOutput) || cut
		r.Result = &v
	}
	res.Truncated = truncated || r.Truncated || cut
	res.Value = r.Result
	res.Notes = append(res.Notes, boxNotes(r.Notes)...)
	switch {
	case timedOut && r.Outcome == protocol.OutcomeInterrupted:
		res.Status = result.StatusTimeout // runCall writes the error (timeoutError)
	case r.Outcome == protocol.OutcomeOK || (r.Outcome == protocol.OutcomeExit && r.ExitCode == 0):
		res.Status = result.StatusSuccess
		res.ExitCode = result.IntPtr(0)
	default:
		res.Status = result.StatusError
		res.ExitCode = result.IntPtr(r.ExitCode)
		res.Error = r.Error
	}
}

// linkLost fills res for an exec whose link broke, and closes sb. Either
// the container died on its own (its exit is reaped a moment later), or it
// is alive and sent an invalid reply, which can only be forged by user
// code: it is replaced, and res says so. timedOut says the call's deadline
// or a hard kill ended it.
func (s *Session) linkLost(res *result.Result, sb *sandbox, err error, timedOut bool) {
	died := sb.waitExit(time.Second)
	if !died {
		s.log.Warn().Str("error", printable.Log(err.Error())).Msg("invalid exec reply from a live sandbox; replacing it")
		sb.kill()
	}
	<-sb.exited
	code := sb.exitCode()
	stalled, broken := sb.linkStalled(), sb.linkBroken()
	sb.close()
	res.StateLost = true
	switch {
	case timedOut:
		res.Status = result.StatusTimeout // runCall writes the error (timeoutError)
		res.LossReason = "timeout"
	case stalled:
		res.Status = result.StatusError
		res.Error = fmt.Sprintf("The sandbox stopped reading its link for %ds; the session was restarted", int(linkWriteBound/time.Second))
		res.LossReason = "link stalled"
	case broken:
		res.Status = result.StatusError
		res.Error = "The bridge hit an internal error while serving this sandbox (see the bridge's log); the session was restarted"
		res.LossReason = lossInternal
	case !died:
		res.Status = result.StatusError
		res.Error = fmt.Sprintf("The sandbox sent an invalid reply (%v); the session was restarted", err)
		res.LossReason = "invalid reply from the sandbox"
	case code == exitOOMKilled:
		res.Status = result.StatusError
		res.ExitCode = result.IntPtr(137)
		res.Error = fmt.Sprintf("memory limit exceeded (MCP_BRIDGE_MEMORY=%s); the session was restarted", s.cfg.MemoryLabel)
		res.LossReason = exitReason(sb)
	default:
		res.Status = result.StatusError
		res.ExitCode = result.IntPtr(code)
		res.Error = fmt.Sprintf("Sandbox exited with code %d", code)
		res.LossReason = exitReason(sb)
	}
	s.log.Warn().Int("exitCode", code).Str("reason", res.LossReason).Msg("session state lost")
}
