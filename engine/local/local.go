// Package local is the test-only sandbox backend (MCP_BRIDGE_RUNTIME=local
// with MCP_BRIDGE_UNSAFE_LOCAL=1): each sandbox is a plain python3 process
// on the host, with NO isolation, speaking the same link as a container.
// *Launcher implements actors.Launcher.
package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/actors/childproc"
	"github.com/bridge-mcp/bridge/entrypoint"
)

var _ actors.Launcher = (*Launcher)(nil)

// Launcher starts local sandboxes.
type Launcher struct {
	// Link is MCP_BRIDGE_LINK: "stdio" keeps the link on the process's
	// stdin and stdout; otherwise it is a socket on fd 3, which a plain
	// process can always take.
	Link string
	Log  zerolog.Logger
}

// Start implements actors.Launcher.
func (l *Launcher) Start(ctx context.Context, session string) (actors.Sandbox, error) {
	l.Log.Warn().Str("session", session).Msg("MCP_BRIDGE_RUNTIME=local: the sandbox is a plain host process with NO isolation (tests only)")
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	argv := []string{py, "-u", "-c", entrypoint.Bootstrap}
	socket := l.Link != "stdio"
	if socket {
		argv = append(argv, strconv.Itoa(childproc.LinkFD))
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = os.TempDir() // not the bridge's own directory: user code writes relative paths
	linked, err := childproc.StartLinked(cmd, socket, l.Log.With().Str("session", session).Logger())
	if err != nil {
		return nil, fmt.Errorf("sandbox: start %s: %w", py, err)
	}
	return sandbox{linked}, nil
}

// StartError implements actors.Launcher.
func (l *Launcher) StartError(logs string, exitCode int) (err error, retry bool) {
	return fmt.Errorf("local sandbox exited with code %d: %s", exitCode, firstLine(logs)), false
}

// sandbox is one local python process; it leaves nothing to remove.
type sandbox struct{ *childproc.Linked }

// Name implements actors.Sandbox: a local sandbox has none.
func (sandbox) Name() string { return "" }

// Link implements actors.Sandbox.
func (s sandbox) Link() actors.Link { return s.Linked.Link() }

// Remove implements actors.Sandbox: nothing outlives the process.
func (sandbox) Remove(context.Context) {}

// firstLine is the first non-empty line of s, "(no output)" when none.
func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return "(no output)"
}
