package engine

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// callGate admits the calls of bridge serve: at most max of a principal's
// calls run at once (MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL), and when the
// bridge is busy the principals share it by their short calls in flight.
//
// Invariants:
//   - A principal's first call in flight never waits on another principal,
//     nor does any call of a principal whose calls in flight all started
//     more than gateYoung ago.
//   - While fewer than share young calls run in all, nobody waits but on
//     max.
//   - From share on, a principal with k young calls in flight starts
//     another only when every other active principal has more than k: a
//     flood of short loops from one principal runs one at a time while
//     another principal works, instead of taking the cores the other's
//     calls wait on.
//   - A principal is active while it has a young call in flight and for
//     gateLinger after a call of its ended, so a client that sends its calls
//     back to back stays active across the gaps between them. A long call
//     (a cell that sleeps, waits on a human or computes for seconds) stops
//     counting once it is older than gateYoung: its CPU is weighed by the
//     sandboxes' CPU weights, and holding back everyone else's calls for
//     its whole length would serialize them for nothing.
//   - A principal's waiting calls start in arrival order, each within its
//     own deadline; one that gives up leaves the queue at once.
type callGate struct {
	max   int
	share int

	mu      sync.Mutex
	tickets uint64
	loads   map[string]*principalLoad
	changed chan struct{} // closed and replaced whenever an answer may change
}

// principalLoad is one principal's calls: in flight (their start times),
// waiting in order, and when its last call ended.
type principalLoad struct {
	starts  []time.Time
	waiting []uint64 // tickets, in arrival order
	lastEnd time.Time
}

// youngAt is how many of l's calls in flight started less than gateYoung
// before now, and when the next of them grows old (zero: none).
func (l *principalLoad) youngAt(now time.Time) (n int, next time.Time) {
	for _, s := range l.starts {
		if old := s.Add(gateYoung); now.Before(old) {
			n++
			if next.IsZero() || old.Before(next) {
				next = old
			}
		}
	}
	return n, next
}

const (
	// gateLinger is how long a principal stays active after a call: a
	// client's next call follows its previous one within a few
	// milliseconds when it runs them in a loop.
	gateLinger = 20 * time.Millisecond
	// gateYoung is how long a call in flight counts toward sharing.
	gateYoung = 2 * time.Second
)

// newCallGate caps each principal at perPrincipal calls in flight; from
// share young calls in flight in all, principals share by them.
func newCallGate(perPrincipal, share int) *callGate {
	return &callGate{max: perPrincipal, share: max(1, share), loads: map[string]*principalLoad{}, changed: make(chan struct{})}
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
		now := time.Now()
		ok, recheck := g.admit(principal, l, ticket, now)
		if ok {
			l.waiting = l.waiting[1:]
			l.starts = append(l.starts, now)
			g.broadcast() // the next in l's queue may go too
			g.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { g.release(l, now) }) }, nil
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
			if i := slices.Index(l.waiting, ticket); i >= 0 {
				l.waiting = slices.Delete(l.waiting, i, i+1)
			}
			g.broadcast()
			g.mu.Unlock()
			return nil, err
		}
	}
}

// admit reports whether ticket of principal p (load l) may start now and,
// when not, the earliest time a linger ends or a call grows old, which may
// change the answer (zero: only a call's start or end will). g.mu is held.
func (g *callGate) admit(p string, l *principalLoad, ticket uint64, now time.Time) (bool, time.Time) {
	if l.waiting[0] != ticket || len(l.starts) >= g.max {
		return false, time.Time{}
	}
	k, recheck := l.youngAt(now)
	if k == 0 {
		return true, time.Time{}
	}
	soonest := func(t time.Time) {
		if !t.IsZero() && (recheck.IsZero() || t.Before(recheck)) {
			recheck = t
		}
	}
	total, fewest := k, math.MaxInt
	for q, o := range g.loads {
		if q == p {
			continue
		}
		n, next := o.youngAt(now)
		total += n
		soonest(next)
		if n == 0 {
			end := o.lastEnd.Add(gateLinger)
			if !now.Before(end) {
				continue // not active
			}
			soonest(end)
		}
		fewest = min(fewest, n)
	}
	if total < g.share || k < fewest {
		return true, time.Time{}
	}
	return false, recheck
}

// release ends the call of l that started at start.
func (g *callGate) release(l *principalLoad, start time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(l.starts, start); i >= 0 {
		l.starts = slices.Delete(l.starts, i, i+1)
	}
	l.lastEnd = time.Now()
	g.broadcast()
}

// broadcast wakes every waiter to look again. g.mu is held.
func (g *callGate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}
