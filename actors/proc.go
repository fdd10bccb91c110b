package actors

import (
	"os/exec"
	"runtime"
	"syscall"
)

// process is a started child and the channel closed when it exits.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed after Wait returned
	code   int           // exit code, 128+signal when signalled; valid after exited
}

// startProcess starts cmd in its own process group with parent-death signal
// SIGKILL. The start happens on an OS thread that stays locked until the
// child exits: Pdeathsig fires when the creating thread dies, so the thread
// must live exactly as long as the child. done runs after Wait, before
// exited is closed.
func startProcess(cmd *exec.Cmd) (*process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := &process{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		p.code = exitCode(cmd, err)
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
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

func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}
