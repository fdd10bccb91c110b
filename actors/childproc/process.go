// Package childproc runs the bridge's child processes: each in its own
// process group, dying with the bridge however the bridge dies (a
// parent-death signal on Linux, the parent watcher elsewhere), with its
// pipes owned by the caller. The sandbox backends and the stdio MCP
// servers use it; so does cmd/bridge, which runs the parent watcher.
//
// It holds no actor and imports only protocol and its sub-packages, so
// every layer above protocol may use it.
package childproc

import (
	"os/exec"
	"syscall"
	"time"
)

// Process is a started child and the channel closed when it exits.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed after Wait returned
	code   int           // exit code, 128+signal when signalled; valid after exited
}

// newProcess is the one constructor of Process: cmd is about to be
// started, and whoever starts it calls wait once it has.
func newProcess(cmd *exec.Cmd) *Process {
	return &Process{cmd: cmd, exited: make(chan struct{})}
}

// Start starts cmd in its own process group and makes it die with the
// bridge: on Linux by a parent-death signal (process_linux.go), elsewhere
// through a watcher that kills the group when the bridge's end of a pipe
// closes (process_other.go, parentwatch.go).
func Start(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	return startDying(cmd)
}

// StartOutliving starts cmd in its own process group with no tie to the
// bridge's life: it runs on when the bridge dies (a watchdog that cleans up
// after the bridge). The caller must make it end.
func StartOutliving(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := newProcess(cmd)
	go p.wait()
	return p, nil
}

// wait waits for the started cmd, records its exit code and closes exited.
func (p *Process) wait() {
	err := p.cmd.Wait()
	p.code = exitCode(p.cmd, err)
	close(p.exited)
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Code is the exit code, 128+signal when signalled; valid once Exited is
// closed.
func (p *Process) Code() int { return p.code }

// Pid is the process id (its group's id too).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// WaitExit waits up to d for the process to exit.
func (p *Process) WaitExit(d time.Duration) bool { return WaitClosed(p.exited, d) }

func exitCode(p *exec.Cmd, err error) int {
	if p.ProcessState == nil {
		return -1
	}
	if ws, ok := p.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if err != nil && p.ProcessState.ExitCode() < 0 {
		return -1
	}
	return p.ProcessState.ExitCode()
}

// SignalGroup signals the child's process group.
func (p *Process) SignalGroup(sig syscall.Signal) {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// WaitClosed waits up to d for ch to close.
func WaitClosed(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
