package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// RunDir is the working directory of every container CLI the bridge runs:
// bridge-run-<uid> in the temp dir, created 0700 and used only when it is a
// directory of this user with that mode. The CLI and what it starts write
// files into their working directory (podman's conmon leaves an `oom` file
// there after each out-of-memory kill), and the bridge is usually started
// in the user's project, which it must never write into. (A directory under
// the state dir made container removal after SIGTERM miss its deadline in
// the lifecycle tests.) Otherwise it is the temp dir itself.
func (l *Launcher) RunDir() string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("bridge-run-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return os.TempDir()
	}
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		return os.TempDir()
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() {
		return os.TempDir()
	}
	return dir
}

// RuntimeCommand is exec.CommandContext for the container CLI with args,
// run in RunDir.
func (l *Launcher) RuntimeCommand(ctx context.Context, cli string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Dir = l.RunDir()
	return cmd
}
