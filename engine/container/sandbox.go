package container

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/actors/childproc"
)

// Start implements actors.Launcher: the container CLI runs as a child of
// the bridge that dies with it, its link a socket on fd 3 or its stdio
// (sandboxCommand.linkFD).
func (l *Launcher) Start(ctx context.Context, session string) (actors.Sandbox, error) {
	c, err := l.command(session)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir = c.dir
	// The CLI dies with the bridge (CLN-2); its own process group lets the
	// bridge kill it and anything it started.
	log := l.log.With().Str("session", session).Str("container", c.name).Logger()
	linked, err := childproc.StartLinked(cmd, c.linkFD, log)
	if err != nil {
		c.release()
		return nil, fmt.Errorf("sandbox: start %s: %w", c.argv[0], err)
	}
	b := &box{Linked: linked, l: l, name: c.name, release: c.release, log: log}
	b.startWatchdog()
	return b, nil
}

// box is one sandbox of this launcher: the CLI's process with its link,
// and the watchdog that removes its container should the bridge die.
type box struct {
	*childproc.Linked
	l       *Launcher
	name    string // container name
	release func() // sandboxCommand.release
	log     zerolog.Logger

	watchPipe io.Closer          // the watchdog's pipe, held open until Release
	watchdog  *childproc.Process // removes the container when its pipe ends (Release, or the bridge's death); nil when none
}

// Name implements actors.Sandbox.
func (b *box) Name() string { return b.name }

// Link implements actors.Sandbox.
func (b *box) Link() actors.Link { return b.Linked.Link() }

// Remove implements actors.Sandbox: the container is force-removed by name.
func (b *box) Remove(ctx context.Context) { b.l.remove(ctx, b.name) }

// Release implements actors.Sandbox. A grandchild may still hold the write
// ends of the CLI's pipes: the drains get a moment, then the read ends
// close. The watchdog's pipe ends, so it removes the container once more
// (a no-op when it is gone), which covers a removal of the bridge's own
// that ran out of time; Release waits for it, then frees the id map.
func (b *box) Release() {
	b.Linked.Release()
	if b.watchdog != nil {
		_ = b.watchPipe.Close()
		<-b.watchdog.Exited()
	}
	b.release()
}

// startWatchdog starts a small process outside the bridge's reach that
// removes the container when the bridge dies, however it dies: it waits for
// EOF on a pipe only the bridge holds. Code in the sandbox can stop the
// supervisor (same uid), so the container's own reaction to stdin EOF is
// not enough (CLN-2).
func (b *box) startWatchdog() {
	argv := b.l.RemoveArgv(b.name)
	if argv == nil {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		b.log.Debug().Err(err).Msg("no container watchdog")
		return
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read -r _ || exec "$@" >/dev/null 2>&1`, "sh"}, argv...)...)
	cmd.Stdin = r
	p, err := childproc.StartOutliving(cmd) // no parent-death signal: it must outlive the bridge
	r.Close()
	if err != nil {
		w.Close()
		b.log.Debug().Err(err).Msg("no container watchdog")
		return
	}
	b.watchdog, b.watchPipe = p, w
}
