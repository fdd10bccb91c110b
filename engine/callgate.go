package engine

import (
	"context"
	"math"
	"sync"
	"time"
)

// callGate admits the calls of bridge serve: at most max of a principal's
// calls run at once (MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL), and when the
// bridge is busy the principals share it by calls in flight.
//
// Invariants:
//   - A principal's first call in flight never waits on another principal.
//   - While fewer than share calls run in all, nobody waits but on max.
//   - From share on, a principal with k calls in flight starts another only
//     when every other active principal has more than k: a flood of loops
//     from one principal runs one at a time while another principal works,
//     instead of taking the cores its calls wait on.
//   - A principal is active while it has a call in flight and for linger
//     after its last one ended, so a client that sends its calls back to
//     back stays active across the gaps between them.
//   - A principal's waiting calls start in arrival order, each within its
//     own deadline; one that gives up leaves the queue at once.
type callGate struct {
	max    int
	share  int
	linger time.Duration

	mu      sync.Mutex
	tickets uint64
	total   int
	loads   map[string]*principalLoad
	changed chan struct{} // closed and replaced whenever an answer may change
}

// principalLoad is one principal's calls: in flight, waiting in order, and
// when its last call ended.
type principalLoad struct {
	inflight int
	waiting  []uint64 // tickets, in arrival order
	lastEnd  time.Time
}

// gateLinger is how long a principal stays active after its last call: a
// client's next call follows its previous one within a few milliseconds
// when it runs them in a loop.
const gateLinger = 20 * time.Millisecond

// newCallGate caps each principal at perPrincipal calls in flight; from share calls
// in flight in all, principals share by calls in flight.
func newCallGate(perPrincipal, share int) *callGate {
	return &callGate{max: perPrincipal, share: max(1, share), linger: gateLinger, loads: map[string]*principalLoad{},
		changed: make(chan struct{})}
}

// acquire waits for principal's turn until deadline or ctx's end; release
// (once) ends the call.
func (g *callGate) acquire(ctx context.Context, principal string, deadline time.Time) (release func(), err error) {
	g.mu.Lock()
	g.tickets++
	ticket := g.tickets
	l := g.loads[principal]
	if l == nil {
		l = &principalLoad{}
		g.loads[principal] = l
	}
	l.waiting = append(l.waiting, ticket)
	g.mu.Unlock()

	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		g.mu.Lock()
		ok, recheck := g.admit(principal, l, ticket, time.Now())
		if ok {
			l.waiting = l.waiting[1:]
			l.inflight++
			g.total++
			g.broadcast() // the next in l's queue may go too
			g.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { g.release(l) }) }, nil
		}
		changed := g.changed
		g.mu.Unlock()

		var expired <-chan time.Time
		var rt *time.Timer
		if !recheck.IsZero() {
			rt = time.NewTimer(time.Until(recheck))
			expired = rt.C
		}
		select {
		case <-changed:
		case <-expired:
		case <-t.C:
			err = context.DeadlineExceeded
		case <-ctx.Done():
			err = ctx.Err()
		}
		if rt != nil {
			rt.Stop()
		}
		if err != nil {
			g.mu.Lock()
			for i, w := range l.waiting {
				if w == ticket {
					l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
					break
				}
			}
			g.broadcast()
			g.mu.Unlock()
			return nil, err
		}
	}
}

// admit reports whether ticket of principal p (load l) may start now and,
// when not, the time a linger ends that may change the answer (zero:
// only a call's start or end will). g.mu is held.
func (g *callGate) admit(p string, l *principalLoad, ticket uint64, now time.Time) (bool, time.Time) {
	if l.waiting[0] != ticket || l.inflight >= g.max {
		return false, time.Time{}
	}
	if l.inflight == 0 || g.total < g.share {
		return true, time.Time{}
	}
	fewest := math.MaxInt
	var recheck time.Time
	for q, o := range g.loads {
		if q == p {
			continue
		}
		if o.inflight == 0 {
			end := o.lastEnd.Add(g.linger)
			if !now.Before(end) {
				continue
			}
			if recheck.IsZero() || end.Before(recheck) {
				recheck = end
			}
		}
		fewest = min(fewest, o.inflight)
	}
	if l.inflight < fewest {
		return true, time.Time{}
	}
	return false, recheck
}

// release ends one call of l.
func (g *callGate) release(l *principalLoad) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l.inflight--
	g.total--
	l.lastEnd = time.Now()
	g.broadcast()
}

// broadcast wakes every waiter to look again. g.mu is held.
func (g *callGate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}
