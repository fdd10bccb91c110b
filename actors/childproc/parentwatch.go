package childproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// WatchParentArg is the hidden first argument that runs the bridge binary
// as a parent watcher (RunParentWatcher) instead of a command.
const WatchParentArg = "__watch-parent"

// watchCommandWith rewrites cmd to run as `<bridge> __watch-parent PATH
// ARGV...` with r as the watcher's fd 3.
func watchCommandWith(cmd *exec.Cmd, r *os.File) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("parent watch: the command already passes extra files")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("parent watch: %w", err)
	}
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	cmd.Args = append([]string{self, WatchParentArg, cmd.Path}, args...)
	cmd.Path = self
	cmd.ExtraFiles = []*os.File{r}
	return nil
}

// RunParentWatcher is the watcher's main: args are the command's path and
// argv. It runs the command in its own process group (the one the bridge
// made it lead), and SIGKILLs that group when fd 3 reaches EOF, which
// happens only when the bridge has died. Otherwise it ends as the command
// ended: the same exit code, or the same signal. SIGTERM, SIGINT and SIGHUP
// sent to the group reach the command; the watcher itself outlives them so
// it can report how the command ended.
func RunParentWatcher(args []string) int {
	if len(args) < 2 {
		fmt.Fprintf(os.Stderr, "bridge: %s: want PATH ARGV0 [ARG...]\n", WatchParentArg)
		return 2
	}
	syscall.CloseOnExec(3)
	watch := os.NewFile(3, "parent-watch")
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	child := &exec.Cmd{Path: args[0], Args: args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if err := child.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "bridge: %v\n", err)
		return 127
	}
	// Lives until the process exits: a read of a pipe cannot be interrupted
	// portably, and this process ends with the command.
	go func() {
		_, _ = io.Copy(io.Discard, watch)
		_ = syscall.Kill(0, syscall.SIGKILL) // 0: this process's group
	}()
	err := child.Wait()
	if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		return 128 + int(ws.Signal())
	}
	if err != nil && child.ProcessState.ExitCode() < 0 {
		return 1
	}
	return child.ProcessState.ExitCode()
}

// startWatched starts cmd under a watcher reading r (see startDying).
func startWatched(cmd *exec.Cmd, r *os.File) (*Process, error) {
	if err := watchCommandWith(cmd, r); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := newProcess(cmd)
	go p.wait()
	return p, nil
}
