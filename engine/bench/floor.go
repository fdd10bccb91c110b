package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/bridge-mcp/bridge/protocol"
)

// echoLoop is the container's side of the pipe floor: it echoes each line
// of stdin on stdout, unbuffered, and ends at EOF.
const echoLoop = "import sys\nr, w = sys.stdin.buffer, sys.stdout.buffer\nfor l in iter(r.readline, b''):\n    w.write(l)\n    w.flush()"

// socketEchoLoop is echoLoop over the socket on fd 3 (the socket link).
const socketEchoLoop = "import os\nr, w = open(3, 'rb'), os.dup(3)\nfor l in iter(r.readline, b''):\n    os.write(w, l)"

// floorBox is a container the bench drives over a link of its own, for
// the floors: in and out are the host's ends of the link.
type floorBox struct {
	cmd    *exec.Cmd
	in     io.Writer
	out    *bufio.Reader
	hangup func() // ends the host's writes: the container sees EOF
	what   string // names the container in errors
}

// startFloorBox starts argv, a container whose command ends it. With
// socket, the container gets one end of a socket pair as fd 3 (argv is
// SocketArgv's); else the link is its stdio through the runtime CLI.
func startFloorBox(ctx context.Context, argv []string, socket bool, what string) (*floorBox, error) {
	b := &floorBox{cmd: exec.CommandContext(ctx, argv[0], argv[1:]...), what: what}
	b.cmd.WaitDelay = 10 * time.Second
	var box *os.File // the container's end of the socket, closed here once it started
	if socket {
		host, boxEnd, err := protocol.SocketPair()
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", what, err)
		}
		box = boxEnd
		b.cmd.ExtraFiles = []*os.File{box}
		b.in, b.out = host, bufio.NewReader(host)
		b.hangup = func() { _ = syscall.Shutdown(int(host.Fd()), syscall.SHUT_WR) }
	} else {
		w, err := b.cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", what, err)
		}
		r, err := b.cmd.StdoutPipe()
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", what, err)
		}
		b.in, b.out, b.hangup = w, bufio.NewReader(r), func() { _ = w.Close() }
	}
	err := b.cmd.Start()
	if box != nil {
		box.Close()
	}
	if err != nil {
		if c, ok := b.in.(io.Closer); ok {
			_ = c.Close()
		}
		return nil, fmt.Errorf("bench: %s container: %w", what, err)
	}
	return b, nil
}

// finish hangs up, drains what the container still writes, waits for it
// and closes the host's end; err, the rounds' error, comes first.
func (b *floorBox) finish(err error) error {
	b.hangup()
	_, _ = io.Copy(io.Discard, b.out)
	if werr := b.cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("bench: %s container: %w", b.what, werr)
	}
	if c, ok := b.in.(io.Closer); ok {
		_ = c.Close()
	}
	return err
}

// socketFloor is pipeFloor over the socket link: the line crosses a socket
// the container got as fd 3 (SocketArgv), without the runtime CLI's or
// conmon's stdio relay.
func socketFloor(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b, err := startFloorBox(ctx, append(append([]string{}, o.SocketArgv...), "python3", "-u", "-c", socketEchoLoop), true, "socket floor")
	if err != nil {
		return nil, err
	}
	d, err := echoRounds(b.out, b.in, n)
	return d, b.finish(err)
}

// echoRounds times n round trips of one short line to an echoing
// container, after one that waits for it to start and 5 warm-up ones.
func echoRounds(out *bufio.Reader, in io.Writer, n int) ([]time.Duration, error) {
	return warmSample(6, n, func() error {
		if _, err := io.WriteString(in, "ping\n"); err != nil {
			return fmt.Errorf("bench: floor container: %w", err)
		}
		line, err := out.ReadString('\n')
		if err != nil || line != "ping\n" {
			return fmt.Errorf("bench: floor container echoed %q: %v", line, err)
		}
		return nil
	})
}

// warmSample runs f warm times untimed, then times it n times (sample).
func warmSample(warm, n int, f func() error) ([]time.Duration, error) {
	for range warm {
		if err := f(); err != nil {
			return nil, err
		}
	}
	return sample(n, f)
}

// pipeFloor times n round trips of one short line through a container
// started with the production flags (ContainerArgv): host → runtime CLI →
// container stdin → Python → stdout → host. It is the floor of any call
// over the sandbox link: a warm run_python adds the MCP hop, the bridge and
// the worker to exactly this path. The container is stopped (stdin EOF)
// before it returns.
func pipeFloor(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b, err := startFloorBox(ctx, append(append([]string{}, o.ContainerArgv...), "python3", "-u", "-c", echoLoop), false, "floor")
	if err != nil {
		return nil, err
	}
	d, err := echoRounds(b.out, b.in, n)
	return d, b.finish(err)
}
