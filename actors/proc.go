package actors

import (
	"os/exec"
	"syscall"
)

// process is a started child and the channel closed when it exits.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed after Wait returned
	code   int           // exit code, 128+signal when signalled; valid after exited
}

// startProcess starts cmd in its own process group and makes it die with
// the bridge: on Linux by a parent-death signal (proc_linux.go), elsewhere
// through a watcher that kills the group when the bridge's end of a pipe
// closes (proc_other.go, parentwatch.go).
func startProcess(cmd *exec.Cmd) (*process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	return startDying(cmd)
}

// wait waits for the started cmd, records its exit code and closes exited.
func (p *process) wait() {
	err := p.cmd.Wait()
	p.code = exitCode(p.cmd, err)
	close(p.exited)
}

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

// signalGroup signals the child's process group.
func (p *process) signalGroup(sig syscall.Signal) {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}
