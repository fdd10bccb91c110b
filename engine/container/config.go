// Package container is the sandbox backend that runs each sandbox as a
// container through a container CLI, podman or docker: it builds the run
// argv with every confinement flag (seccomp.go, idmap.go, mounts.go),
// chooses the CLI and its OCI runtime (runtime.go, runtime_choice.go),
// starts the CLI as a child whose link is a socket on fd 3 or its stdio,
// removes containers (with a watchdog that outlives the bridge) and sweeps
// what dead bridges left (sweep.go). *Launcher implements actors.Launcher.
//
// It takes its settings as a Config, never the bridge's whole environment:
// the engine builds one from MCP_BRIDGE_*.
package container

import "github.com/bridge-mcp/bridge/actors"

var _ actors.Launcher = (*Launcher)(nil)

// DefaultImage is the sandbox image that `bridge image build` produces.
const DefaultImage = "localhost/bridge-python:latest"

// Config is what the launcher reads of the bridge's settings.
type Config struct {
	Runtime       string // MCP_BRIDGE_RUNTIME: CLI name or path; "" means podman, then docker
	OCIRuntime    string // MCP_BRIDGE_OCI_RUNTIME; "" keeps the engine's default (RT-3 may pick runc)
	Image         string
	ContainerUser string
	Memory        string // as given, lower-cased, e.g. "512m"
	MemoryBytes   int64
	Pids          int
	CPUs          string // "" when unset
	Mounts        []Mount
	Seccomp       string // "" (built-in profile), "runtime", or a profile path
	StateDir      string // where the built-in seccomp profile is written
	Link          string // "auto" (a socket where the runtime can pass one) or "stdio"
	Owner         string // this bridge's bridge.owner label (engine/owner)
}
