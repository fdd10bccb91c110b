package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/owner"
)

// childRegistry records each stdio child as <state>/.bridge/children/<pid>
// holding the owner label and the child's start time, so that a bridge
// started after a SIGKILL can remove the process groups the dead one left
// (a direct child dies with the bridge, but an npx-style wrapper's own
// child may not).
type childRegistry struct {
	dir   string
	owner string
	log   zerolog.Logger
}

// Add implements actors.ChildRegistry.
func (r *childRegistry) Add(pid int) {
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return
	}
	data := fmt.Sprintf("%s\n%d\n", r.owner, owner.StartMs(pid))
	if err := os.WriteFile(filepath.Join(r.dir, strconv.Itoa(pid)), []byte(data), 0o600); err != nil {
		r.log.Debug().Err(err).Msg("child registry")
	}
}

// Remove implements actors.ChildRegistry.
func (r *childRegistry) Remove(pid int) {
	_ = os.Remove(filepath.Join(r.dir, strconv.Itoa(pid)))
}

// killGroup SIGKILLs the members of process group pgid that started no
// earlier than its recorded leader: the leader itself may be gone (it died
// with the bridge), and the start-time bound keeps a recycled pid from
// matching an unrelated group. It reports whether it killed anything.
func killGroup(pgid int, leaderStart int64) bool {
	killed := false
	for _, p := range owner.Procs() {
		if p.Pgrp == pgid && p.StartMs >= leaderStart {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			killed = true
		}
	}
	return killed
}

// Sweep kills the process groups of children whose bridge is dead, when the
// recorded process is still the same one (same start time), and forgets
// them. It returns how many groups it killed.
func (r *childRegistry) Sweep() int {
	n := 0
	for _, pid := range owner.PidEntries(r.dir) {
		path := filepath.Join(r.dir, strconv.Itoa(pid))
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(string(data), "\n")
		if len(lines) < 2 || owner.Alive(lines[0]) {
			continue
		}
		start, _ := strconv.ParseInt(lines[1], 10, 64)
		if start != 0 && killGroup(pid, start) {
			n++
		}
		_ = os.Remove(path)
	}
	if n > 0 {
		r.log.Info().Int("groups", n).Msg("killed server process groups left by a dead bridge")
	}
	return n
}
