package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// MaxTimeout is the highest timeout a call may ask for, in seconds
	// (MCP_BRIDGE_MAX_TIMEOUT), which a timeout's error names; 0: not known.
	MaxTimeout int
	Reply      chan result.Result

	// Discovered is every configured server name (MCP_DISCOVERED_SERVERS).
	Discovered []string
}

// Session is the actor of one named session: it owns at most one sandbox
// and runs calls one at a time, in arrival order (CON-2).
//
// Its mailbox is unbuffered and paired with done, as in syncthing's
// folder.doInSync: Serve answers every request it received, and once done
// is closed it receives no more, so a sender that sees done knows its
// request was never taken.
type Session struct {
	name      string // as the caller wrote it
	principal string // who owns it; "" for stdio
	key       string // SessionKey(principal, name): the manager's key
	cfg       *SandboxConfig
	spares    *Sessions // the spare supplier and the manager; nil starts containers directly
	requests  chan *ExecRequest
	evicts    chan request[struct{}, bool]
	ticks     chan time.Time // 1-buffered: the reaper's latest tick
	log       zerolog.Logger

	// stopped is why the session takes no more requests: written by Serve
	// once, before it closes done; read only after done is closed.
	stopped string
	done    chan struct{}

	// Owned by the Serve goroutine.
	sb        *sandbox
	queue     callQueue
	running   chan callDone // the call goroutine's result; nil when no call runs
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

// NewSession returns the actor for name, a SessionKey; spares may be nil.
func NewSession(name string, cfg *SandboxConfig, spares *Sessions, idle time.Duration, loss string) *Session {
	principal, short := splitKey(name)
	return &Session{
		name: short, principal: principal, key: name, cfg: cfg, spares: spares, idleLimit: idle, loss: loss,
		requests: make(chan *ExecRequest),
		evicts:   make(chan request[struct{}, bool]),
		ticks:    make(chan time.Time, 1),
		done:     make(chan struct{}),
		log:      sessionLog(cfg.Log, short, principal),
		lastUsed: time.Now(),
	}
}

func (s *Session) String() string { return "session:" + s.key }

// Done is closed when the session takes no more requests (it was evicted,
// or the bridge is stopping).
func (s *Session) Done() <-chan struct{} { return s.done }

// Exec queues req. It returns false only when ctx ended first; otherwise req
// gets exactly one Result on req.Reply. A request for an evicted session is
// handed to the session that replaces it under the same name.
func (s *Session) Exec(ctx context.Context, req *ExecRequest) bool {
	select {
	case s.requests <- req:
		return true
	case <-s.done:
	case <-ctx.Done():
		return false
	}
	if s.stopped == stoppedEvicted && s.spares != nil {
		next, err := s.spares.Get(ctx, s.key)
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

// tick hands the session a reaper tick without blocking; it is dropped
// while an earlier one waits.
func (s *Session) tick(now time.Time) {
	select {
	case s.ticks <- now:
	default:
	}
}

// evict asks the session to end if it is idle (SES-6); true when it ended
// (now or before).
func (s *Session) evict(ctx context.Context) (bool, error) {
	ended, err := ask(ctx, s.evicts, s.done, struct{}{})
	if errors.Is(err, errStopped) {
		return true, nil
	}
	return ended, err
}

// callDone is what a call goroutine hands back to the actor.
type callDone struct {
	result result.Result
	sb     *sandbox // the sandbox after the call; nil if it is gone
	reset  bool
}

// Serve runs the actor until ctx ends or it is evicted, then stops its
// sandbox and waits for every sandbox it is closing.
func (s *Session) Serve(ctx context.Context) error {
	defer s.closing.Wait()
	defer s.dropSandbox()
	for {
		s.startNext(ctx)
		select {
		case req := <-s.requests:
			s.queue.push(req)
		case <-s.queue.due():
			s.expire(time.Now())
		case done := <-s.running:
			s.finished(done)
		case now := <-s.ticks:
			s.onTick(now)
		case r := <-s.evicts:
			if s.onEvict(r) {
				<-ctx.Done() // the manager removes this actor
				return ctx.Err()
			}
		case <-ctx.Done():
			s.shutdown()
			return ctx.Err()
		}
	}
}

// startNext starts the oldest queued call when none runs; calls whose
// caller is gone are answered and skipped.
func (s *Session) startNext(ctx context.Context) {
	for s.running == nil && s.queue.len() > 0 {
		req := s.queue.pop()
		if req.Ctx.Err() != nil {
			req.Reply <- result.Result{Status: result.StatusError, Error: "cancelled", Session: s.name}
			continue
		}
		if s.calls == 0 && s.cfg.Snapshots != nil {
			// Call numbers go on across the bridge's restarts.
			if m, ok := s.cfg.Snapshots.Stat(s.principal, s.name); ok {
				s.calls = max(m.LastCall, m.Call)
			}
		}
		s.calls++
		call, loss := s.calls, s.loss
		s.loss = "" // reported by this call
		out := make(chan callDone, 1)
		go func(sb *sandbox) {
			done := s.runCall(ctx, sb, req, call, loss)
			req.Reply <- done.result
			out <- done
		}(s.sb)
		s.running = out
		s.sb = nil // the call goroutine owns it until done
	}
}

// expire answers the queued calls whose deadline has passed while another
// call held the session (CON-2); the running call is unaffected.
func (s *Session) expire(now time.Time) {
	for _, req := range s.queue.expire(now) {
		t := int(req.Timeout / time.Second)
		req.Reply <- result.Result{
			Status: result.StatusTimeout, Session: s.name, TimeoutSeconds: t,
			Error: fmt.Sprintf("Session '%s' was busy with another call for the whole %ds timeout", s.name, t),
		}
	}
}

// finished takes the sandbox back from the call that ended.
func (s *Session) finished(done callDone) {
	s.running = nil
	s.sb = done.sb
	s.lastUsed = time.Now()
	if done.reset && s.sb != nil {
		s.closeAsync(s.sb, false) // SES-4: fresh state next call, no stateLost
		s.sb = nil
	}
}

// onTick ends a sandbox idle for longer than the idle limit, and notes one
// that died while idle.
func (s *Session) onTick(now time.Time) {
	idle := s.running == nil && s.queue.len() == 0
	if idle && s.sb != nil && s.idleLimit > 0 && now.Sub(s.lastUsed) > s.idleLimit {
		s.endSandbox(fmt.Sprintf("idle for more than %ds", int(s.idleLimit/time.Second)))
	}
	if s.sb != nil && !s.sb.alive() && s.running == nil {
		s.noteExit(s.sb)
	}
}

// onEvict ends the session if no call runs or waits, and answers whether it
// did. Requests not yet received were never taken: their senders see done
// and go to the session that replaces this one.
func (s *Session) onEvict(r request[struct{}, bool]) bool {
	if s.running != nil || s.queue.len() > 0 {
		r.answer(false)
		return false
	}
	s.stopped = stoppedEvicted
	if s.sb != nil {
		s.endSandbox("evicted")
	}
	close(s.done)
	r.answer(true)
	return true
}

// shutdown waits for the running call, which sees ctx and ends within its
// bounds, then refuses new requests and answers the queued ones.
func (s *Session) shutdown() {
	if s.running != nil {
		s.sb = (<-s.running).sb
		s.running = nil
	}
	s.stopped = stoppedShutdown
	close(s.done)
	for _, req := range s.queue.drain() {
		req.Reply <- result.Result{Status: result.StatusError, Session: s.name, Error: "the bridge is shutting down"}
	}
}

// dropSandbox closes the sandbox the session holds, if any.
func (s *Session) dropSandbox() {
	if s.sb != nil {
		s.closeAsync(s.sb, true)
		s.sb = nil
	}
}

// closeAsync closes sb beside the actor, which stays responsive meanwhile;
// Serve waits for it before it returns. keep first takes the session's
// snapshot when durability is on exit (the end is polite: idle, evicted,
// the bridge stopping).
func (s *Session) closeAsync(sb *sandbox, keep bool) {
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		if keep {
			sb.snapshotBeforeClose()
		}
		sb.close()
	}()
}

// endSandbox stops the idle sandbox for reason, which the next call reports.
func (s *Session) endSandbox(reason string) {
	s.log.Info().Str("reason", reason).Msg("session ended")
	s.closeAsync(s.sb, true)
	s.sb = nil
	s.loss = reason
}

// noteExit records the death of an idle sandbox (SES-5).
func (s *Session) noteExit(sb *sandbox) {
	s.loss = exitReason(sb)
	s.log.Warn().Int("exitCode", sb.exitCode()).Msg("sandbox exited while idle")
	s.closeAsync(sb, false)
	s.sb = nil
}
