package container

// sweep.go removes what dead bridges left: containers whose owner is dead
// (CTR-4) and conmon processes stranded mid-creation. The reaper actor
// runs it shortly after start.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bridge-mcp/bridge/engine/owner"
)

// Sweep removes containers whose owner on this host is dead (CTR-4).
func (l *Launcher) Sweep(ctx context.Context) int {
	cli, _, _, err := l.resolve()
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := append(l.GlobalArgs(), "ps", "-a", "--filter", "label=bridge.owner", "--format", `{{.Names}} {{index .Labels "bridge.owner"}}`)
	out, err := l.RuntimeCommand(ctx, cli, args...).Output()
	if err != nil {
		l.log.Debug().Err(err).Msg("sweep: list containers")
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		name, label, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || owner.Alive(label) {
			continue
		}
		l.remove(ctx, name)
		n++
	}
	if n > 0 {
		l.log.Info().Int("containers", n).Msg("removed containers left by a dead bridge")
	}
	n += l.sweepStranded(ctx)
	l.log.Debug().Int("removed", n).Msg("sweep: done")
	return n
}

// sweepStranded kills conmon processes (and their `runc init` children) of
// containers named bridge-<pid>-… whose bridge is dead, and deletes their
// runtime state. They exist when a container CLI was killed while creating
// a container (a SIGKILLed bridge takes its CLIs with it): podman no longer
// lists such a container, so removal by name cannot reach it.
func (l *Launcher) sweepStranded(ctx context.Context) int {
	n := 0
	for _, pid := range owner.PidEntries("/proc") {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasSuffix(strings.SplitN(string(raw), "\x00", 2)[0], "conmon") {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		var name, id, runtime string
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "-n", "--name":
				name = args[i+1]
			case "-c", "--cid":
				id = args[i+1]
			case "-r", "--runtime":
				runtime = args[i+1]
			}
		}
		bridge, ok := bridgePidOf(name)
		if !ok || bridge == os.Getpid() || owner.StartMs(bridge) != 0 {
			continue // not ours, or its bridge is alive (a recycled pid is left alone)
		}
		killTree(pid)
		if runtime != "" && id != "" {
			dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_ = l.RuntimeCommand(dctx, runtime, "delete", "--force", id).Run()
			cancel()
		}
		n++
	}
	if n > 0 {
		l.log.Info().Int("containers", n).Msg("killed containers stranded mid-creation by a dead bridge")
	}
	return n
}

// bridgePidOf parses the bridge pid out of a container name bridge-<pid>-….
func bridgePidOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "bridge-")
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil
}

// killTree SIGKILLs pid's children, then pid.
func killTree(pid int) {
	for _, p := range owner.Procs() {
		if p.PPID == pid {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
