package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// echoLoop is the container's side of the pipe floor: it echoes each line
// of stdin on stdout, unbuffered, and ends at EOF.
const echoLoop = "import sys\nr, w = sys.stdin.buffer, sys.stdout.buffer\nfor l in iter(r.readline, b''):\n    w.write(l)\n    w.flush()"

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
	// The first round trip waits for the container to start; then 5 warm-up.
	var d []time.Duration
	for i := 0; i < 6 && err == nil; i++ {
		err = roundTrip()
	}
	if err == nil {
		d, err = sample(n, roundTrip)
	}
	in.Close()
	_, _ = io.Copy(io.Discard, out)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("bench: floor container: %w", werr)
	}
	return d, err
}
