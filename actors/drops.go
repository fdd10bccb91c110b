package actors

import (
	"sync"
	"time"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// dropReportEvery is how often, at most, a sandbox's dropped frames are
// reported outside a call.
const dropReportEvery = time.Minute

// frameDrops counts the frames of one sandbox that the host refused or
// dropped. A hostile cell sends such frames as fast as the link carries
// them, and one log line each (with the frame's fields in full) wrote
// 172 MB of stderr in one call, which MCP clients keep on the user's disk.
// They are reported as counts instead: once at the end of each call, and
// outside calls at most once per dropReportEvery. Each reason keeps its
// first sample, through printable.Log; reasons are a few fixed host
// strings, so one report stays within a few KiB.
type frameDrops struct {
	mu       sync.Mutex
	counts   map[string]int
	samples  map[string]string
	lastIdle time.Time // the last report outside a call
}

// add counts one frame dropped for reason, with detail from the sandbox
// ("" for none). idle says no call is active; it reports whether an idle
// report is due now.
func (d *frameDrops) add(reason, detail string, idle bool, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts, d.samples = map[string]int{}, map[string]string{}
	}
	d.counts[reason]++
	if _, ok := d.samples[reason]; !ok && detail != "" {
		d.samples[reason] = printable.Log(detail)
	}
	if idle && now.Sub(d.lastIdle) >= dropReportEvery {
		d.lastIdle = now
		return true
	}
	return false
}

// take returns the counts since the last take and starts over.
func (d *frameDrops) take() (total int, counts map[string]int, samples map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	counts, samples = d.counts, d.samples
	d.counts, d.samples = nil, nil
	for _, n := range counts {
		total += n
	}
	return total, counts, samples
}

// dropped counts a frame the host refused or dropped; outside a call it
// reports the counts when the last such report is dropReportEvery old.
func (s *sandbox) dropped(reason, detail string) {
	if s.drops.add(reason, detail, s.active.Load() == nil, time.Now()) {
		s.reportDrops(0)
	}
}

// reportDrops logs the frames dropped since the last report, if any, as
// one line; call is the call that just ended (0: none).
func (s *sandbox) reportDrops(call int64) {
	total, counts, samples := s.drops.take()
	if total == 0 {
		return
	}
	ev := s.log.Warn()
	if call != 0 {
		ev = ev.Int64("call", call)
	}
	ev.Int("frames", total).Interface("reasons", counts).Interface("samples", samples).
		Msg("link: refused or dropped sandbox frames")
}
