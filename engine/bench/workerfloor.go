package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/bridge-mcp/bridge/entrypoint"
	"github.com/bridge-mcp/bridge/protocol"
)

// workerFloor times n exec round trips of print(1) straight into a sandbox:
// the real entrypoint in a container with the production flags, booted and
// driven over the link the bridge uses here (the socket on fd 3, else the
// CLI's stdio) by the bench itself, with no bridge and no MCP in between.
// It is the worker's share of a warm call, the link's round trip included.
func workerFloor(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	socket := o.SocketArgv != nil
	argv := append(append([]string{}, o.ContainerArgv...), "python3", "-u", "-c", entrypoint.Bootstrap)
	if socket {
		argv = append(append([]string{}, o.SocketArgv...), "python3", "-u", "-c", entrypoint.Bootstrap, "3")
	}
	b, err := startFloorBox(ctx, argv, socket, "worker floor")
	if err != nil {
		return nil, err
	}
	d, err := workerRounds(b.in, b.out, n)
	return d, b.finish(err)
}

// workerRounds boots the sandbox on in/out, waits for its ready frame and
// times n exec calls of print(1) after 5 warm-up ones, answering what the
// sandbox asks the host on the way (its saved tools: none).
func workerRounds(in io.Writer, out *bufio.Reader, n int) ([]time.Duration, error) {
	boot, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": protocol.MethodBoot, "params": protocol.BootParams{
		Files: entrypoint.Files(), Main: entrypoint.Main, Version: "bench",
		Limits: protocol.Limits{MaxFrameBytes: 1 << 20, MaxOutputBytes: 32 << 10, MaxInFlight: 32, MaxImages: 8, MaxImageBytes: 1 << 19},
	}})
	if err != nil {
		return nil, fmt.Errorf("bench: worker floor: %w", err)
	}
	if _, err := in.Write(append(boot, '\n')); err != nil {
		return nil, fmt.Errorf("bench: worker floor: boot: %w", err)
	}
	var call int
	exec := func() error {
		call++
		frame := `{"jsonrpc":"2.0","id":` + strconv.Itoa(call) + `,"method":"exec","params":{"call":` + strconv.Itoa(call) + `,"code":"print(1)"}}` + "\n"
		if _, err := io.WriteString(in, frame); err != nil {
			return fmt.Errorf("bench: worker floor: %w", err)
		}
		return awaitFrame(in, out, call)
	}
	if err := awaitFrame(in, out, 0); err != nil { // the ready frame
		return nil, err
	}
	return warmSample(5, n, exec)
}

// awaitFrame reads frames until the reply to exec call (call 0: the ready
// notification), answering the sandbox's requests with an empty tool list.
func awaitFrame(in io.Writer, out *bufio.Reader, call int) error {
	for {
		line, err := out.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("bench: worker floor: the sandbox ended: %w", err)
		}
		var f struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &f) != nil {
			continue
		}
		switch {
		case call == 0 && f.Method == protocol.MethodReady:
			return nil
		case f.Method != "" && f.ID != nil:
			reply := `{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"tools":[]}}` + "\n"
			if _, err := io.WriteString(in, reply); err != nil {
				return fmt.Errorf("bench: worker floor: %w", err)
			}
		case f.Method == "" && string(f.ID) == strconv.Itoa(call):
			if f.Error != nil {
				return fmt.Errorf("bench: worker floor: exec failed: %s", f.Error)
			}
			return nil
		}
	}
}

// frontFloor times n calls of a tool that does nothing (the bench server's
// echo) on an MCP stdio server built on the bridge's MCP library, by the
// bench's client: the MCP hop of a warm call with no work behind it.
func frontFloor(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	p, err := startMCP(ctx, append([]string{o.Bridge}, benchServerArgs(0, false)...), o.Env)
	if err != nil {
		return nil, err
	}
	defer p.close()
	return warmSample(5, n, func() error { return p.echo(ctx) })
}
