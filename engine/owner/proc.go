package owner

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Proc is what the bridge reads from /proc/<pid>/stat.
type Proc struct {
	PID, PPID, Pgrp int
	StartMs         int64 // start time in unix ms
}

// readProc parses /proc/<pid>/stat; ok is false when the process is gone.
func readProc(pid int) (Proc, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is fields[0], ppid [1], pgrp [2], starttime [19].
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return Proc{}, false
	}
	f := strings.Fields(string(stat)[i+1:])
	if len(f) < 20 {
		return Proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return Proc{}, false
	}
	return Proc{PID: pid, PPID: ppid, Pgrp: pgrp, StartMs: bootTimeMs() + ticks*1000/100}, true // USER_HZ is 100
}

// StartMs is the start time of pid in unix ms, 0 if unknown.
func StartMs(pid int) int64 {
	st, _ := readProc(pid)
	return st.StartMs
}

// Procs returns every process's stat (none where there is no /proc).
func Procs() []Proc {
	pids := PidEntries("/proc")
	out := make([]Proc, 0, len(pids))
	for _, pid := range pids {
		if st, ok := readProc(pid); ok {
			out = append(out, st)
		}
	}
	return out
}

// PidEntries are the entries of dir named by a pid (/proc, the children
// registry).
func PidEntries(dir string) []int {
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
