package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// interruptGrace is how long an interrupted cell may take to end before its
// container is replaced (TMO-2).
const interruptGrace = 2 * time.Second

// ExecRequest is one run_python call for a session. Reply is 1-buffered; the
// session always sends exactly one Result on it.
type ExecRequest struct {
	Ctx      context.Context
	Code     string
	Servers  []protocol.Server
	Timeout  time.Duration
	Deadline time.Time // queued time + Timeout (TMO-1)
	Reply    chan result.Result

	// Discovered is every configured server name (MCP_DISCOVERED_SERVERS).
	Discovered []string
}

// Session is the actor of one named session: it owns at most one sandbox
// and runs calls one at a time, in arrival order (CON-2).
type Session struct {
	name     string
	cfg      *SandboxConfig
	spares   *Sessions // the spare supplier and the manager; nil starts containers directly
	requests chan *ExecRequest
	control  chan sessionControl
	log      zerolog.Logger

	// mu guards stopped: Exec sends on requests only under the read lock with
	// stopped unset, so once Serve has set it under the write lock, the
	// channel's content is final and Serve answers all of it.
	mu      sync.RWMutex
	stopped string        // "" while accepting; else evicted or stopping
	done    chan struct{} // closed when the session takes no more requests

	// Owned by the Serve goroutine.
	sb        *sandbox
	calls     int64
	lastUsed  time.Time
	loss      string // a state loss not yet reported
	idleLimit time.Duration
	closing   sync.WaitGroup // sandboxes being closed; waited for before Serve returns
}

// Reasons a session stopped taking requests.
const (
	stoppedEvicted  = "evicted"
	stoppedShutdown = "shutdown"
)

type sessionControl struct {
	now   time.Time
	evict bool      // end the session if idle (SES-6)
	reply chan bool // true when the session ended
}

// NewSession returns the actor for name; spares may be nil.
func NewSession(name string, cfg *SandboxConfig, spares *Sessions, idle time.Duration, loss string) *Session {
	return &Session{
		name: name, cfg: cfg, spares: spares, idleLimit: idle, loss: loss,
		requests: make(chan *ExecRequest, 128),
		control:  make(chan sessionControl, 1),
		done:     make(chan struct{}),
		log:      cfg.Log.With().Str("actor", "session").Str("session", name).Logger(),
		lastUsed: time.Now(),
	}
}

func (s *Session) String() string { return "session:" + s.name }

// Done is closed when the session takes no more requests (it was evicted,
// or the bridge is stopping).
func (s *Session) Done() <-chan struct{} { return s.done }

// Exec queues req. It returns false only when ctx ended first; otherwise req
// gets exactly one Result on req.Reply. A request for an evicted session is
// handed to the session that replaces it under the same name.
func (s *Session) Exec(ctx context.Context, req *ExecRequest) bool {
	s.mu.RLock()
	stopped := s.stopped
	if stopped == "" {
		defer s.mu.RUnlock()
		select {
		case s.requests <- req:
			return true
		case <-ctx.Done():
			return false
		}
	}
	s.mu.RUnlock()
	if stopped == stoppedEvicted && s.spares != nil {
		next, err := s.spares.Get(ctx, s.name)
		if err == nil && next != s {
			return next.Exec(ctx, req)
		}
		if ctx.Err() != nil {
			return false
		}
	}
	req.Reply <- result.Result{Status: result.StatusError, Session: s.name, Error: "the bridge is shutting down"}
	return true
}

// hold takes the write lock, so no Exec can send, and returns queue with
// every request already sent appended; settle releases it. Senders waiting
// on a full channel hold the read lock, so the channel is drained while the
// write lock is awaited.
func (s *Session) hold(queue []*ExecRequest) []*ExecRequest {
	locked := make(chan struct{})
	go func() {
		s.mu.Lock()
		close(locked)
	}()
	for {
		select {
		case req := <-s.requests:
			queue = append(queue, req)
		case <-locked:
			for {
				select {
				case req := <-s.requests:
					queue = append(queue, req)
				default:
					return queue
				}
			}
		}
	}
}

// settle sets why the session stopped ("": it takes requests) and releases
// the write lock hold took.
func (s *Session) settle(why string) {
	s.stopped = why
	s.mu.Unlock()
}

// callDone is what a call goroutine hands back to the actor.
type callDone struct {
	result result.Result
	sb     *sandbox // the sandbox after the call; nil if it is gone
	reset  bool
}

// Serve runs the actor until ctx ends or it is evicted, then stops its
// sandbox and waits for every sandbox it is closing. Each queued request has
// its own deadline timer (TMO-1): the earliest deadline in the queue is
// armed, wherever that request is.
func (s *Session) Serve(ctx context.Context) error {
	defer s.closing.Wait()
	defer func() {
		if s.sb != nil {
			s.closeAsync(s.sb)
			s.sb = nil
		}
	}()
	var (
		queue   []*ExecRequest
		running chan callDone
		expire  *time.Timer
	)
	expireC := func() <-chan time.Time {
		if expire == nil {
			return nil
		}
		return expire.C
	}
	rearm := func() {
		if expire != nil {
			expire.Stop()
			expire = nil
		}
		if len(queue) == 0 {
			return
		}
		first := queue[0].Deadline
		for _, req := range queue[1:] {
			if req.Deadline.Before(first) {
				first = req.Deadline
			}
		}
		expire = time.NewTimer(time.Until(first))
	}
	for {
		if running == nil && len(queue) > 0 {
			for len(queue) > 0 && running == nil {
				req := queue[0]
				queue = queue[1:]
				if req.Ctx.Err() != nil {
					req.Reply <- result.Result{Status: result.StatusError, Error: "cancelled", Session: s.name}
					continue
				}
				s.calls++
				call, loss := s.calls, s.loss
				s.loss = "" // reported by this call
				running = make(chan callDone, 1)
				go func(sb *sandbox, out chan callDone) {
					done := s.runCall(ctx, sb, req, call, loss)
					req.Reply <- done.result
					out <- done
				}(s.sb, running)
				s.sb = nil // the call goroutine owns it until done
			}
			rearm()
		}
		select {
		case req := <-s.requests:
			queue = append(queue, req)
			rearm()
		case <-expireC():
			now := time.Now()
			kept := queue[:0]
			for _, req := range queue {
				if req.Deadline.After(now) {
					kept = append(kept, req)
					continue
				}
				t := int(req.Timeout / time.Second)
				req.Reply <- result.Result{
					Status: result.StatusTimeout, Session: s.name, TimeoutSeconds: t,
					Error: fmt.Sprintf("Session '%s' was busy with another call for the whole %ds timeout", s.name, t),
				}
			}
			queue = kept
			rearm()
		case done := <-running:
			running = nil
			s.sb = done.sb
			s.lastUsed = time.Now()
			if done.reset && s.sb != nil {
				s.closeAsync(s.sb) // SES-4: fresh state next call, no stateLost
				s.sb = nil
			}
		case c := <-s.control:
			if c.evict {
				// Requests already sent make the session busy: take them
				// first, with new ones held off while it decides.
				queue = s.hold(queue)
				if running == nil && len(queue) == 0 {
					s.settle(stoppedEvicted)
					if s.sb != nil {
						s.endSandbox("evicted")
					}
					close(s.done)
					c.reply <- true
					<-ctx.Done() // the manager removes this actor
					return ctx.Err()
				}
				s.settle("")
				rearm()
				c.reply <- false
				continue
			}
			if running == nil && len(queue) == 0 && s.sb != nil && s.idleLimit > 0 && c.now.Sub(s.lastUsed) > s.idleLimit {
				s.endSandbox(fmt.Sprintf("idle for more than %ds", int(s.idleLimit/time.Second)))
			}
			if s.sb != nil && !s.sb.alive() && running == nil {
				s.noteExit(s.sb)
			}
			if c.reply != nil {
				c.reply <- false
			}
		case <-ctx.Done():
			if running != nil {
				// The call goroutine sees ctx and ends within its bounds.
				done := <-running
				s.sb = done.sb
			}
			queue = s.hold(queue)
			s.settle(stoppedShutdown)
			for _, req := range queue {
				req.Reply <- result.Result{Status: result.StatusError, Session: s.name, Error: "the bridge is shutting down"}
			}
			close(s.done)
			return ctx.Err()
		}
	}
}

// closeAsync closes sb beside the actor, which stays responsive meanwhile;
// Serve waits for it before it returns.
func (s *Session) closeAsync(sb *sandbox) {
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		sb.close()
	}()
}

// endSandbox stops the idle sandbox for reason, which the next call reports.
func (s *Session) endSandbox(reason string) {
	s.log.Info().Str("reason", reason).Msg("session ended")
	s.closeAsync(s.sb)
	s.sb = nil
	s.loss = reason
}

// noteExit records the death of an idle sandbox (SES-5).
func (s *Session) noteExit(sb *sandbox) {
	s.loss = exitReason(sb)
	s.log.Warn().Int("exitCode", sb.exitCode()).Msg("sandbox exited while idle")
	s.closeAsync(sb)
	s.sb = nil
}

// exitOOMKilled is the exit code of a sandbox whose worker the kernel's OOM
// killer ended, as the supervisor tells it from the container cgroup's
// oom_kill counter (entrypoint/supervisor.py OOM_EXIT). Every other code,
// 137 included (an external SIGKILL), is reported as the exit code it is.
const exitOOMKilled = 99

// exitReason is the loss reason of an exited sandbox.
func exitReason(sb *sandbox) string {
	switch code := sb.exitCode(); {
	case sb.linkStalled():
		return "link stalled"
	case code == exitOOMKilled:
		return "memory limit exceeded"
	default:
		return fmt.Sprintf("sandbox exited with code %d", code)
	}
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

// start returns a new ready sandbox, the spare first when there is one.
func (s *Session) start(ctx context.Context) (*sandbox, error) {
	for attempt := 0; attempt < 2; attempt++ {
		var err error
		var sb *sandbox
		if s.spares != nil && attempt == 0 {
			sb = s.spares.takeSpare(ctx)
		}
		if sb == nil {
			if sb, err = startSandbox(s.cfg, s.name); err != nil {
				return nil, err
			}
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
	finish := func(r result.Result, sb *sandbox, reset bool) callDone {
		if loss != "" && !r.StateLost {
			r.StateLost, r.LossReason = true, loss
		}
		r.DurationMs = time.Since(start).Milliseconds()
		return callDone{result: r, sb: sb, reset: reset}
	}

	// The start of a container counts against the start timeout only
	// (TMO-1): the call's deadline moves by the time the start took.
	acquired := time.Now()
	sb, prior, err := s.acquire(ctx, sb)
	callDeadline := req.Deadline.Add(time.Since(acquired))
	if prior != "" {
		loss = prior
	}
	if err != nil {
		res.Status, res.Error = result.StatusError, err.Error()
		return finish(res, nil, false)
	}
	call := &activeCall{
		scope: Scope{Session: s.name, Call: n, Servers: res.Servers, Deadline: callDeadline, ToolCalls: new(atomic.Int64)},
		limit: 2*s.cfg.MaxOutput + 1024,
		media: newMedia(s.cfg.Boot.Limits),
	}
	sb.active.Store(call)
	defer sb.active.Store(nil)
	progress := progressFrom(req.Ctx)
	if progress != nil {
		defer call.streamProgress(progress)()
	}

	type reply struct {
		r   protocol.ExecResult
		err error
	}
	replies := make(chan reply, 1)
	go func() {
		var r protocol.ExecResult
		err := sb.conn.Call(context.Background(), protocol.MethodExec, protocol.ExecParams{
			Call: call.scope.Call, Code: req.Code, Servers: req.Servers, OutputLimit: s.cfg.MaxOutput,
			Progress:   progress != nil,
			Discovered: req.Discovered,
		}, &r)
		replies <- reply{r, err}
	}()

	deadline := time.NewTimer(time.Until(callDeadline))
	defer deadline.Stop()
	var (
		grace, linger      <-chan time.Time
		timedOut, hardKill bool
		cancelC, shutdownC = req.Ctx.Done(), ctx.Done()
		exitedC            = sb.exited
		killed             chan struct{} // closed when the hard kill is done
		got                reply
	)
	interrupt := func() {
		if grace == nil && !hardKill {
			sb.interrupt(call.scope.Call)
			grace = time.After(interruptGrace)
		}
	}
wait:
	for {
		select {
		case got = <-replies:
			break wait
		case <-deadline.C:
			timedOut = true
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

	output, truncated, reset := call.snapshot()
	res.Output = output
	res.Images, res.ImageNotes = call.images(got.r.Saved)
	if got.err == nil {
		r := got.r
		// The reply may be forged by user code: every field it carries
		// is capped here, whatever the sandbox's own caps did (TRN-3).
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
			res.Status = result.StatusTimeout
			res.Error = fmt.Sprintf("Execution timed out after %ds", t)
		case r.Outcome == protocol.OutcomeOK || (r.Outcome == protocol.OutcomeExit && r.ExitCode == 0):
			res.Status = result.StatusSuccess
			res.ExitCode = result.IntPtr(0)
		default:
			res.Status = result.StatusError
			res.ExitCode = result.IntPtr(r.ExitCode)
			res.Error = r.Error
		}
		return finish(res, sb, reset || r.Reset)
	}

	// The exec frame never left: it is over the frame cap (the code plus
	// the granted servers' tool lists). The sandbox is untouched.
	if errors.Is(got.err, protocol.ErrFrameTooLarge) {
		res.Status = result.StatusError
		res.Error = fmt.Sprintf("The code and the tool lists of the servers it may call do not fit in one frame: %v (MCP_BRIDGE_MAX_FRAME_BYTES); send less code or fewer servers", got.err)
		return finish(res, sb, false)
	}
	// The link broke. Either the container died on its own (its exit is
	// reaped a moment later), or it is alive and sent an invalid reply, which
	// can only be forged by user code: replace it and say so.
	died := sb.waitExit(time.Second)
	if !died {
		s.log.Warn().Err(got.err).Msg("invalid exec reply from a live sandbox; replacing it")
		sb.kill()
	}
	<-sb.exited
	code := sb.exitCode()
	stalled := sb.linkStalled()
	sb.close()
	res.StateLost = true
	switch {
	case timedOut || hardKill:
		res.Status = result.StatusTimeout
		res.Error = fmt.Sprintf("Execution timed out after %ds", t)
		res.LossReason = "timeout"
	case stalled:
		res.Status = result.StatusError
		res.Error = fmt.Sprintf("The sandbox stopped reading its link for %ds; the session was restarted", int(linkWriteBound/time.Second))
		res.LossReason = "link stalled"
	case !died:
		res.Status = result.StatusError
		res.Error = fmt.Sprintf("The sandbox sent an invalid reply (%v); the session was restarted", got.err)
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
	return finish(res, nil, false)
}
