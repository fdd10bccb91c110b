package engine

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procStat is what the bridge reads from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgrp int
	startMs         int64 // start time in unix ms
}

// readProcStat parses /proc/<pid>/stat; ok is false when the process is gone.
func readProcStat(pid int) (procStat, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is fields[0], ppid [1], pgrp [2], starttime [19].
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(stat)[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, ppid: ppid, pgrp: pgrp, startMs: bootTimeMs() + ticks*1000/100}, true // USER_HZ is 100
}

// processStartMs is the start time of pid in unix ms, 0 if unknown.
func processStartMs(pid int) int64 {
	st, _ := readProcStat(pid)
	return st.startMs
}

// allProcs returns every process's stat.
func allProcs() []procStat {
	pids := pidEntries("/proc")
	out := make([]procStat, 0, len(pids))
	for _, pid := range pids {
		if st, ok := readProcStat(pid); ok {
			out = append(out, st)
		}
	}
	return out
}

// pidEntries are the entries of dir named by a pid (/proc, the children
// registry).
func pidEntries(dir string) []int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
