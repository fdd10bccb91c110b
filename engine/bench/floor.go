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

// socketFloor is pipeFloor over the socket link: the line crosses a socket
// the container got as fd 3 (SocketArgv), without the runtime CLI's or
// conmon's stdio relay.
func socketFloor(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	argv := append(append([]string{}, o.SocketArgv...), "python3", "-u", "-c", socketEchoLoop)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	host, box, err := protocol.SocketPair()
	if err != nil {
		return nil, fmt.Errorf("bench: socket floor: %w", err)
	}
	defer host.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 10 * time.Second
	cmd.ExtraFiles = []*os.File{box}
	err = cmd.Start()
	box.Close()
	if err != nil {
		return nil, fmt.Errorf("bench: socket floor container: %w", err)
	}
	d, err := echoRounds(bufio.NewReader(host), host, n)
	_ = syscall.Shutdown(int(host.Fd()), syscall.SHUT_WR)
	_, _ = io.Copy(io.Discard, host)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("bench: socket floor container: %w", werr)
	}
	return d, err
}

// echoRounds times n round trips of one short line to an echoing
// container, after one that waits for it to start and 5 warm-up ones.
func echoRounds(out *bufio.Reader, in io.Writer, n int) ([]time.Duration, error) {
	roundTrip := func() error {
		if _, err := io.WriteString(in, "ping\n"); err != nil {
			return fmt.Errorf("bench: floor container: %w", err)
		}
		line, err := out.ReadString('\n')
		if err != nil || line != "ping\n" {
			return fmt.Errorf("bench: floor container echoed %q: %v", line, err)
		}
		return nil
	}
	var err error
	for i := 0; i < 6 && err == nil; i++ {
		err = roundTrip()
	}
	if err != nil {
		return nil, err
	}
	return sample(n, roundTrip)
}

// pipeFloor times n round trips of one short line through a container
// started with the production flags (ContainerArgv): host → runtime CLI →
// container stdin → Python → stdout → host. It is the floor of any call
// over the sandbox link: a warm run_python adds the MCP hop, the bridge and
// the worker to exactly this path. The container is stopped (stdin EOF)
// before it returns.
func pipeFloor(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	argv := append(append([]string{}, o.ContainerArgv...), "python3", "-u", "-c", echoLoop)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 10 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: floor container: %w", err)
	}
	out := bufio.NewReader(outPipe)
	d, err := echoRounds(out, in, n)
	in.Close()
	_, _ = io.Copy(io.Discard, out)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("bench: floor container: %w", werr)
	}
	return d, err
}
