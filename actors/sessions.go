package actors

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"
)

// spareName is the session label of the pre-started container (SES-2).
const spareName = "spare"

// Sessions is the manager actor of the sessions supervisor: it maps names to
// session actors, keeps one spare container warm, enforces
// MCP_BRIDGE_MAX_SESSIONS by evicting the least recently used idle session,
// and forwards the reaper's ticks.
type Sessions struct {
	// SingleUse: no spare replaces an adopted one (bridge exec runs one
	// call and exits). Set before Serve.
	SingleUse bool
	// PerPrincipal caps the live sessions of one principal of bridge
	// serve (MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL); 0 means none. Set
	// before Serve.
	PerPrincipal int

	cfg  *SandboxConfig
	max  int
	idle time.Duration
	log  zerolog.Logger

	gets   chan request[string, getReply]
	spares chan request[struct{}, *sandbox]
	ticks  chan time.Time
	done   chan struct{} // closed when Serve has returned for good

	counts atomic.Pointer[map[string]int] // live sessions by principal, for metrics
	// index is a snapshot of live, republished by Serve whenever a session
	// is added or removed: Get finds an existing session in it without a
	// round trip to the actor.
	index atomic.Pointer[map[string]*liveSession]

	// Owned by the Serve goroutine.
	live      *serviceMap[string, *liveSession]
	lost      map[string]string // loss reasons of evicted names
	spare     *sandbox
	spareFrom time.Time
	adopted   *sandbox         // the spare last handed out, until it served its first call or is gone
	spareDue  <-chan time.Time // armed when the adopted spare is ready: the next one starts by then at the latest
	closing   sync.WaitGroup   // spare closes in flight
}

type liveSession struct {
	s        *Session
	lastUsed atomic.Int64 // Unix nanoseconds of the last Get; written by any caller of Get
}

func (ls *liveSession) touch() { ls.lastUsed.Store(time.Now().UnixNano()) }

type getReply struct {
	s   *Session
	err error
}

// NewSessions returns the manager; sup is the sessions supervisor, to which
// the caller adds the manager itself and which hosts every session actor.
func NewSessions(cfg *SandboxConfig, sup *suture.Supervisor, maxSessions int, idle time.Duration) *Sessions {
	return &Sessions{
		cfg: cfg, max: maxSessions, idle: idle,
		log:    cfg.Log.With().Str("actor", "sessions").Logger(),
		gets:   make(chan request[string, getReply]),
		spares: make(chan request[struct{}, *sandbox]),
		ticks:  make(chan time.Time, 1),
		done:   make(chan struct{}),
		live:   newServiceMap[string, *liveSession](sup),
		lost:   map[string]string{},
	}
}

func (m *Sessions) String() string { return "sessions" }

// errShuttingDown answers a call that arrives while the bridge stops.
var errShuttingDown = errors.New("the bridge is shutting down")

// Get returns the actor for name, creating it if needed (SES-6).
func (m *Sessions) Get(ctx context.Context, name string) (*Session, error) {
	// The common case, a live session, needs no round trip. One evicted
	// right after this lookup hands the call to its successor (Exec).
	if idx := m.index.Load(); idx != nil && !isClosed(m.done) {
		if ls := (*idx)[name]; ls != nil && !isClosed(ls.s.done) {
			ls.touch()
			return ls.s, nil
		}
	}
	r, err := ask(ctx, m.gets, m.done, name)
	switch {
	case errors.Is(err, errStopped):
		return nil, errShuttingDown
	case err != nil:
		return nil, err
	}
	return r.s, r.err
}

// Live reports whether the session of key is live (it may hold no
// sandbox): a lookup in the published index, no round trip.
func (m *Sessions) Live(key string) bool {
	if idx := m.index.Load(); idx != nil {
		if ls := (*idx)[key]; ls != nil && !isClosed(ls.s.done) {
			return true
		}
	}
	return false
}

// Tick forwards a reaper tick without blocking.
func (m *Sessions) Tick(now time.Time) {
	select {
	case m.ticks <- now:
	default:
	}
}

// takeSpare hands the spare (ready or still starting) to a session and
// starts the next one; nil when there is none.
func (m *Sessions) takeSpare(ctx context.Context) *sandbox {
	sb, _ := ask(ctx, m.spares, m.done, struct{}{})
	return sb
}

// Serve runs the manager until ctx ends. It never waits on a session
// stopping: an evicted session replies at once and closes its sandbox on its
// own; the supervisor owns its stop and waits for it at shutdown.
func (m *Sessions) Serve(ctx context.Context) error {
	m.startSpare()
	defer func() {
		if ctx.Err() != nil {
			m.closeDone()
		}
		if m.spare != nil {
			m.spare.close()
			m.spare = nil
		}
		m.closing.Wait()
	}()
	for {
		select {
		case g := <-m.gets:
			s, err := m.get(ctx, g.q)
			g.answer(getReply{s, err})
			m.publishLive()
		case r := <-m.spares:
			sb := m.spare
			m.spare = nil
			if sb != nil && !sb.alive() && sb.exitCode() == 0 {
				sb = nil // ended normally (idle); let the session start its own
			}
			r.answer(sb)
			// The next spare starts once this one has served its first
			// call (at most spareDelay after it is ready): a container
			// start beside that call, or beside the start a call is waiting
			// for, would slow it.
			m.adopted, m.spareDue = sb, nil
			if sb == nil {
				m.nextSpare()
			}
		case <-m.adoptedUp():
			if a := m.adopted; m.spareDue == nil && !isClosed(a.exited) && !isClosed(a.served) {
				m.spareDue = time.After(spareDelay) // it is ready; its first call is running or coming
				continue
			}
			// Served (its result is still on its way to the client) or gone.
			m.adopted, m.spareDue = nil, time.After(spareSettle)
		case <-m.spareDue:
			m.nextSpare()
		case now := <-m.ticks:
			m.live.Each(func(_ string, ls *liveSession) { ls.s.tick(now) })
			if m.spare != nil && m.idle > 0 && now.Sub(m.spareFrom) > m.idle {
				m.log.Debug().Msg("spare container idle; stopping it")
				m.closeAsync(m.spare)
				m.spare = nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// spareDelay is the longest the next spare waits for the adopted one's
// first call once that one is ready; spareSettle is how long it waits after
// that call, whose result is then still being rendered and sent.
const (
	spareDelay  = time.Second
	spareSettle = 100 * time.Millisecond
)

// adoptedUp fires when the last adopted spare has exited, when it is ready
// (until spareDue is armed), then when it has served its first call; nil
// (never) when there is none.
func (m *Sessions) adoptedUp() <-chan struct{} {
	switch a := m.adopted; {
	case a == nil:
		return nil
	case isClosed(a.exited):
		return a.exited
	case m.spareDue == nil:
		return a.ready
	default:
		return a.served
	}
}

// nextSpare ends the wait on the adopted spare and starts the next one.
func (m *Sessions) nextSpare() {
	m.adopted, m.spareDue = nil, nil
	if !m.SingleUse {
		m.startSpare()
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (m *Sessions) closeDone() {
	select {
	case <-m.done:
	default:
		close(m.done)
	}
}

func (m *Sessions) closeAsync(sb *sandbox) {
	m.closing.Add(1)
	go func() {
		defer m.closing.Done()
		sb.close()
	}()
}

func (m *Sessions) startSpare() {
	sb, err := startSandbox(m.cfg, spareName)
	if err != nil {
		m.log.Debug().Err(err).Msg("no spare container")
		return
	}
	m.spare = sb
	m.spareFrom = time.Now()
}

func (m *Sessions) get(ctx context.Context, name string) (*Session, error) {
	if ls, ok := m.live.Get(name); ok {
		ls.touch()
		return ls.s, nil
	}
	// A new session evicts the caller's own idle sessions first. Only a
	// principal with no live session may end another's: the least recently
	// used idle one of the principal holding the most, so one principal
	// cannot keep every other out.
	principal, _ := splitKey(name)
	if principal != "" && m.PerPrincipal > 0 && m.countOf(principal) >= m.PerPrincipal && !m.evictOne(ctx, principal, stoppedEvicted) {
		return nil, fmt.Errorf("Too many sessions for principal %s, all busy (MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL=%d): reuse a session name, "+
			"or retry when a call ends; the bridge's operator can raise MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL", principal, m.PerPrincipal)
	}
	if m.live.Len() >= m.max && !m.evictOne(ctx, principal, stoppedEvicted) && !m.evictForNewcomer(ctx, principal) {
		return nil, fmt.Errorf("Too many sessions, all busy (MCP_BRIDGE_MAX_SESSIONS=%d): retry when a call ends; "+
			"the bridge's operator can raise MCP_BRIDGE_MAX_SESSIONS", m.max)
	}
	s := NewSession(name, m.cfg, m, m.idle, m.lost[name])
	delete(m.lost, name)
	ls := &liveSession{s: s}
	ls.touch()
	m.live.Add(name, ls, s)
	return s, nil
}

// countOf is the number of principal's live sessions.
func (m *Sessions) countOf(principal string) int {
	n := 0
	m.live.Each(func(k string, _ *liveSession) {
		if p, _ := splitKey(k); p == principal {
			n++
		}
	})
	return n
}

// evictForNewcomer lets a principal with no live session (not the
// anonymous caller of stdio) end the least recently used idle session of
// the principal holding the most, trying the next when all of one's are
// busy; false when none could be ended.
func (m *Sessions) evictForNewcomer(ctx context.Context, principal string) bool {
	if principal == "" || m.countOf(principal) > 0 {
		return false
	}
	held := map[string]int{}
	m.live.Each(func(k string, _ *liveSession) {
		if p, _ := splitKey(k); p != "" {
			held[p]++
		}
	})
	holders := make([]string, 0, len(held))
	for p := range held {
		holders = append(holders, p)
	}
	sort.Slice(holders, func(i, j int) bool {
		if held[holders[i]] != held[holders[j]] {
			return held[holders[i]] > held[holders[j]]
		}
		return holders[i] < holders[j]
	})
	why := fmt.Sprintf("evicted while idle, so that another principal could start its first session (MCP_BRIDGE_MAX_SESSIONS=%d)", m.max)
	for _, p := range holders {
		if m.evictOne(ctx, p, why) {
			return true
		}
	}
	return false
}

// evictOne ends principal's least recently used idle session, whose next
// result reports the loss as reason; false if all of them are busy.
func (m *Sessions) evictOne(ctx context.Context, principal, reason string) bool {
	type candidate struct {
		name string
		ls   *liveSession
	}
	var byUse []candidate
	m.live.Each(func(n string, ls *liveSession) {
		if p, _ := splitKey(n); p == principal {
			byUse = append(byUse, candidate{n, ls})
		}
	})
	sort.Slice(byUse, func(i, j int) bool { return byUse[i].ls.lastUsed.Load() < byUse[j].ls.lastUsed.Load() })
	for _, c := range byUse {
		n, ls := c.name, c.ls
		ended, err := ls.s.evict(ctx)
		if err != nil {
			return false
		}
		if !ended {
			continue
		}
		// The session has ended its sandbox's close beside itself; removal
		// only cancels its context, and the supervisor waits for it.
		if err := m.live.Remove(n); err != nil {
			m.log.Warn().Err(err).Str("session", n).Msg("could not remove an evicted session")
		}
		m.lost[n] = reason
		m.log.Info().Str("session", n).Str("reason", reason).Msg("evicted the least recently used idle session")
		return true
	}
	return false
}
