package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startDying starts cmd with parent-death signal SIGKILL. The start happens
// on an OS thread that stays locked until the child exits: Pdeathsig fires
// when the creating thread dies, so the thread must live exactly as long as
// the child.
func startDying(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := newProcess(cmd)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}
