package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol"
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
	Reply    chan Result

	// Discovered is every configured server name (MCP_DISCOVERED_SERVERS).
	Discovered []string
}

// Session is the actor of one named session: it owns at most one sandbox
// and runs calls one at a time, in arrival order (CON-2).
type Session struct {
	name     string
	cfg      *SandboxConfig
	spares   *Sessions // the spare supplier; nil starts containers directly
	requests chan *ExecRequest
	control  chan sessionControl
	log      zerolog.Logger

	// Owned by the Serve goroutine.
	sb        *sandbox
	calls     int64
	lastUsed  time.Time
	loss      string // a state loss not yet reported
	idleLimit time.Duration
}

type sessionControl struct {
	now   time.Time
	evict bool      // end the session if idle (SES-6)
	reply chan bool // true when the session ended its sandbox
}

// NewSession returns the actor for name; spares may be nil.
func NewSession(name string, cfg *SandboxConfig, spares *Sessions, idle time.Duration, loss string) *Session {
	return &Session{
		name: name, cfg: cfg, spares: spares, idleLimit: idle, loss: loss,
		requests: make(chan *ExecRequest, 128),
		control:  make(chan sessionControl, 1),
		log:      cfg.Log.With().Str("actor", "session").Str("session", name).Logger(),
		lastUsed: time.Now(),
	}
}

func (s *Session) String() string { return "session:" + s.name }

// Exec queues req. It never blocks past ctx.
func (s *Session) Exec(ctx context.Context, req *ExecRequest) bool {
	select {
	case s.requests <- req:
		return true
	case <-ctx.Done():
		return false
	}
}

// callDone is what a call goroutine hands back to the actor.
type callDone struct {
	result Result
	sb     *sandbox // the sandbox after the call; nil if it is gone
	reset  bool
}

// Serve runs the actor until ctx ends, then stops its sandbox.
func (s *Session) Serve(ctx context.Context) error {
	defer func() {
		if s.sb != nil {
			s.sb.close()
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
		if len(queue) > 0 {
			expire = time.NewTimer(time.Until(queue[0].Deadline))
		}
	}
	for {
		if running == nil {
			for len(queue) > 0 && running == nil {
				req := queue[0]
				queue = queue[1:]
				if req.Ctx.Err() != nil {
					req.Reply <- Result{Status: StatusError, Error: "cancelled", Session: s.name}
					continue
				}
				running = make(chan callDone, 1)
				go func(sb *sandbox, out chan callDone) {
					done := s.runCall(ctx, sb, req)
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
			if len(queue) == 1 {
				rearm()
			}
		case <-expireC():
			now := time.Now()
			for len(queue) > 0 && !queue[0].Deadline.After(now) {
				req := queue[0]
				queue = queue[1:]
				t := int(req.Timeout / time.Second)
				req.Reply <- Result{
					Status: StatusTimeout, Session: s.name, TimeoutSeconds: t,
					Error: fmt.Sprintf("Session '%s' was busy with another call for the whole %ds timeout", s.name, t),
				}
			}
			rearm()
		case done := <-running:
			running = nil
			s.sb = done.sb
			s.lastUsed = time.Now()
			if done.reset && s.sb != nil {
				s.sb.close() // SES-4: fresh state next call, no stateLost
				s.sb = nil
			}
		case c := <-s.control:
			ended := false
			if running == nil && len(queue) == 0 && s.sb != nil {
				switch {
				case c.evict:
					s.stopSandbox("evicted")
					ended = true
				case s.idleLimit > 0 && c.now.Sub(s.lastUsed) > s.idleLimit:
					s.stopSandbox(fmt.Sprintf("idle for more than %ds", int(s.idleLimit/time.Second)))
					ended = true
				}
			} else if c.evict && running == nil && len(queue) == 0 {
				ended = true // nothing to stop
			}
			if s.sb != nil && !s.sb.alive() && running == nil {
				s.noteExit(s.sb)
			}
			if c.reply != nil {
				c.reply <- ended
			}
		case <-ctx.Done():
			if running != nil {
				<-running // the call goroutine sees ctx and ends within its bounds
			}
			for _, req := range queue {
				req.Reply <- Result{Status: StatusError, Session: s.name, Error: "the bridge is shutting down"}
			}
			return ctx.Err()
		}
	}
}

func (s *Session) stopSandbox(reason string) {
	s.log.Info().Str("reason", reason).Msg("session ended")
	s.sb.close()
	s.sb = nil
	s.loss = reason
}

// noteExit records the death of an idle sandbox (SES-5).
func (s *Session) noteExit(sb *sandbox) {
	s.loss = exitReason(sb.exitCode())
	s.log.Warn().Int("exitCode", sb.exitCode()).Msg("sandbox exited while idle")
	sb.close()
	s.sb = nil
}

func exitReason(code int) string {
	if code == 137 {
		return "memory limit exceeded"
	}
	return fmt.Sprintf("sandbox exited with code %d", code)
}

// acquire returns a ready sandbox: the current one, else the spare, else a
// new one. The start is bounded by the start timeout.
func (s *Session) acquire(ctx context.Context, sb *sandbox) (*sandbox, error) {
	if sb != nil {
		if sb.alive() {
			return sb, nil
		}
		s.loss = exitReason(sb.exitCode())
		sb.close()
	}
	for attempt := 0; attempt < 2; attempt++ {
		var err error
		sb = nil
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

// runCall runs one call from start to result. It owns sb for the duration.
func (s *Session) runCall(ctx context.Context, sb *sandbox, req *ExecRequest) callDone {
	start := time.Now()
	t := int(req.Timeout / time.Second)
	res := Result{Session: s.name, TimeoutSeconds: t}
	for _, srv := range req.Servers {
		res.Servers = append(res.Servers, srv.Name)
	}
	finish := func(r Result, sb *sandbox, reset bool) callDone {
		if s.loss != "" && !r.StateLost {
			r.StateLost, r.LossReason = true, s.loss
		}
		s.loss = ""
		r.DurationMs = time.Since(start).Milliseconds()
		return callDone{result: r, sb: sb, reset: reset}
	}

	// The start of a container counts against the start timeout only.
	sb, err := s.acquire(ctx, sb)
	if err != nil {
		res.Status, res.Error = StatusError, err.Error()
		return finish(res, nil, false)
	}
	s.calls++
	call := &activeCall{
		scope: Scope{Session: s.name, Call: s.calls, Servers: res.Servers, Deadline: req.Deadline, ToolCalls: new(atomic.Int64)},
		limit: 2*s.cfg.MaxOutput + 1024,
	}
	sb.active.Store(call)
	defer sb.active.Store(nil)

	type reply struct {
		r   protocol.ExecResult
		err error
	}
	replies := make(chan reply, 1)
	go func() {
		var r protocol.ExecResult
		err := sb.conn.Call(context.Background(), protocol.MethodExec, protocol.ExecParams{
			Call: call.scope.Call, Code: req.Code, Servers: req.Servers, OutputLimit: s.cfg.MaxOutput,
			Discovered: req.Discovered,
		}, &r)
		replies <- reply{r, err}
	}()

	deadline := time.NewTimer(time.Until(req.Deadline))
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
	if got.err == nil {
		r := got.r
		res.Truncated = truncated || r.Truncated
		res.Value = r.Result
		res.Notes = append(res.Notes, boxNotes(r.Notes)...)
		switch {
		case timedOut && r.Outcome == protocol.OutcomeInterrupted:
			res.Status = StatusTimeout
			res.Error = fmt.Sprintf("Execution timed out after %ds", t)
		case r.Outcome == protocol.OutcomeOK || (r.Outcome == protocol.OutcomeExit && r.ExitCode == 0):
			res.Status = StatusSuccess
			res.ExitCode = IntPtr(0)
		default:
			res.Status = StatusError
			res.ExitCode = IntPtr(r.ExitCode)
			res.Error = r.Error
		}
		return finish(res, sb, reset || r.Reset)
	}

	// The exec frame never left: it is over the frame cap (the code plus
	// the granted servers' tool lists). The sandbox is untouched.
	if errors.Is(got.err, protocol.ErrFrameTooLarge) {
		res.Status = StatusError
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
	sb.close()
	res.StateLost = true
	switch {
	case !died && !timedOut && !hardKill:
		res.Status = StatusError
		res.Error = fmt.Sprintf("The sandbox sent an invalid reply (%v); the session was restarted", got.err)
		res.LossReason = "invalid reply from the sandbox"
	case timedOut || hardKill:
		res.Status = StatusTimeout
		res.Error = fmt.Sprintf("Execution timed out after %ds", t)
		res.LossReason = "timeout"
	case code == 137:
		res.Status = StatusError
		res.ExitCode = IntPtr(137)
		res.Error = fmt.Sprintf("memory limit exceeded (MCP_BRIDGE_MEMORY=%s); the session was restarted", s.cfg.MemoryLabel)
		res.LossReason = "memory limit exceeded"
	default:
		res.Status = StatusError
		res.ExitCode = IntPtr(code)
		res.Error = fmt.Sprintf("Sandbox exited with code %d", code)
		res.LossReason = exitReason(code)
	}
	s.log.Warn().Int("exitCode", code).Str("reason", res.LossReason).Msg("session state lost")
	return finish(res, nil, false)
}
