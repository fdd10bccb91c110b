package actors

import (
	"context"
	"sync"
	"time"
)

// cpuweight.go weighs each principal's sandboxes against the others' when
// the CPU is short (bridge serve): the sandboxes of a principal with n live
// sessions each get 1/n of a full weight, so a principal's sandboxes
// together weigh as much as one sandbox of a principal with one session.
// One principal running loops in many sessions then takes no more of the
// sandboxes' CPU than another principal's single session, while the CPU
// is contended; weights do nothing while it is not (the scheduler lends
// idle CPU to whoever runs).

// CPUWeighter is a Sandbox whose CPU weight can change while it runs (a
// container's CPU shares). A backend where weights cannot be set (rootless
// podman on cgroup v1 has no cgroup to set them in) does nothing and
// returns nil; an error is logged at debug level and the weight tried
// again at the next call.
type CPUWeighter interface {
	SetCPUWeight(ctx context.Context, weight int) error
}

// FullCPUWeight is a sandbox's weight alone: cgroup v1's default CPU
// shares, which a container starts with. MinCPUWeight is cgroup v1's least.
const (
	FullCPUWeight = 1024
	MinCPUWeight  = 2
)

// cpuWeightBound bounds one weight update (a runtime CLI call).
const cpuWeightBound = 10 * time.Second

// principalCPUWeight is the weight of each sandbox of a principal with
// sessions live sessions.
func principalCPUWeight(sessions int) int {
	return max(MinCPUWeight, FullCPUWeight/max(1, sessions))
}

// cpuWeight is a sandbox's weight: the one wanted and the one applied.
type cpuWeight struct {
	mu      sync.Mutex
	want    int // 0: FullCPUWeight
	applied int // 0: FullCPUWeight (the runtime's default)
	busy    bool
}

// current is the weight applied; w.mu is held.
func (w *cpuWeight) current() int {
	if w.applied == 0 {
		return FullCPUWeight
	}
	return w.applied
}

// weigh sets the sandbox's weight to want, in the background (a runtime
// CLI call takes tens of milliseconds, which a call must not wait for). It
// is a no-op when the weight is already want or the backend has no
// weights. At most one update runs per sandbox; it applies the latest
// want. The update is owned by the sandbox: close ends it (life) and
// waits for it (wg).
func (s *sandbox) weigh(want int) {
	w, ok := s.box.(CPUWeighter)
	if !ok {
		return
	}
	s.weight.mu.Lock()
	defer s.weight.mu.Unlock()
	s.weight.want = want
	if s.weight.busy || want == s.weight.current() {
		return
	}
	s.weight.busy = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			s.weight.mu.Lock()
			next := s.weight.want
			if next == s.weight.current() || s.life.Err() != nil {
				s.weight.busy = false
				s.weight.mu.Unlock()
				return
			}
			s.weight.mu.Unlock()
			ctx, cancel := context.WithTimeout(s.life, cpuWeightBound)
			err := w.SetCPUWeight(ctx, next)
			cancel()
			s.weight.mu.Lock()
			if err != nil {
				// Tried again at the next call, not in a loop here.
				s.weight.busy = false
				s.weight.mu.Unlock()
				s.log.Debug().Err(err).Int("weight", next).Msg("sandbox CPU weight not set")
				return
			}
			s.weight.applied = next
			s.weight.mu.Unlock()
		}
	}()
}

// weighFor gives the sandbox of a principal's session its share of the
// principal's weight (bridge serve only: the stdio front has one user).
func (s *Session) weighFor(sb *sandbox) {
	if s.principal == "" || s.spares == nil || sb == nil {
		return
	}
	sb.weigh(principalCPUWeight(s.spares.Counts()[s.principal]))
}
