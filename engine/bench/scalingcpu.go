package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/stat and /proc/PID/stat times
// (100 on every Linux the bench runs on).
const clockTick = 10 * time.Millisecond

// cpuSnap is where the machine's CPU time had gone at one moment: the
// scaling figure's split of a burst's CPU time (cpuSplit).
type cpuSnap struct {
	busy   time.Duration // every core's non-idle time (/proc/stat)
	bridge time.Duration // the bridge process under test
	bench  time.Duration // this process (the MCP client driving the calls)
	boxes  time.Duration // the session containers (their cgroups), when readable
}

// cpuSplit is the CPU time spent during the bursts, by whom. other is
// the machine's busy time nobody above accounts for: the runtime's own
// processes (conmon) and whatever else runs on the machine.
type cpuSplit struct {
	boxes, bridge, bench, other, busy time.Duration
	boxesKnown                        bool
}

func (s cpuSplit) add(a, b cpuSnap) cpuSplit {
	s.busy += b.busy - a.busy
	s.bridge += b.bridge - a.bridge
	s.bench += b.bench - a.bench
	s.boxes += b.boxes - a.boxes
	s.other = max(0, s.busy-s.bridge-s.bench-s.boxes)
	return s
}

// boxCgroups returns the CPU accounting file of each session's container,
// read from /proc/self/cgroup inside it; nil when any is not visible from
// the host (a private cgroup namespace shows "/").
func boxCgroups(ctx context.Context, p *proc, sessions []string) []string {
	const code = "print(open('/proc/self/cgroup').read())"
	var files []string
	for _, s := range sessions {
		out, err := p.run(ctx, code, s)
		if err != nil {
			return nil
		}
		f := cgroupCPUFile(out)
		if f == "" {
			return nil
		}
		files = append(files, f)
	}
	return files
}

// cgroupCPUFile maps a /proc/PID/cgroup text to the host file holding the
// group's CPU usage: cpuacct.usage (v1, nanoseconds) or cpu.stat (v2).
func cgroupCPUFile(text string) string {
	var v2 string
	for line := range strings.SplitSeq(text, "\n") {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || parts[2] == "/" {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "cpuacct" {
				return filepath.Join("/sys/fs/cgroup/cpuacct", parts[2], "cpuacct.usage")
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = filepath.Join("/sys/fs/cgroup", parts[2], "cpu.stat")
		}
	}
	if v2 != "" {
		if _, err := os.Stat(v2); err == nil {
			return v2
		}
	}
	return ""
}

// cgroupCPU reads one cgroup CPU file (cgroupCPUFile); 0 when unreadable.
func cgroupCPU(file string) time.Duration {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	if filepath.Base(file) == "cpuacct.usage" {
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(n)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(n) * time.Microsecond
		}
	}
	return 0
}

// snapCPU reads where the CPU time has gone so far.
func snapCPU(bridgePID int, boxes []string) cpuSnap {
	var s cpuSnap
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i := 1; i < len(f); i++ {
			if i == 4 || i == 5 || i >= 9 { // idle, iowait; guest time is already in user
				continue
			}
			n, _ := strconv.ParseInt(f[i], 10, 64)
			s.busy += time.Duration(n) * clockTick
		}
	}
	s.bridge = processCPU(bridgePID)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.bench = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, f := range boxes {
		s.boxes += cgroupCPU(f)
	}
	return s
}

// processCPU is pid's CPU time in nanoseconds: the sum of its threads'
// schedstat (a tick-granular /proc/PID/stat would round a burst's few
// milliseconds away). Threads that already ended are not counted; the
// bridge's (Go's) threads live as long as the process.
func processCPU(pid int) time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(n)
		}
	}
	return total
}
