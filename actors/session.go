package actors

import (
	"context"
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
