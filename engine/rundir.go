package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
)

// RunDir is the working directory of every container CLI the bridge runs:
// <state>/.bridge/run. The CLI and what it starts write files into their
// working directory (podman's conmon leaves an `oom` file there after each
// out-of-memory kill), and the bridge is usually started in the user's
// project, which it must never write into. When the state dir cannot be
// created it falls back to the system temp dir.
func (l *Launcher) RunDir() string {
	dir := filepath.Join(l.env.StateDir, ".bridge", "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
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
