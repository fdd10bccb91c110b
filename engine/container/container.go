package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/bridge-mcp/bridge/actors/childproc"
	"github.com/bridge-mcp/bridge/entrypoint"
)

// ErrNoRuntime is the reference's message when no container CLI is found (RT-1).
var ErrNoRuntime = errors.New("No container runtime found. Install podman or rootless docker and set MCP_BRIDGE_RUNTIME if multiple runtimes are available.")

// ArgvSpec is everything the container command depends on. ContainerArgv is
// a pure function of it, so golden tests pin the exact flags.
type ArgvSpec struct {
	CLI        string // path or name of podman/docker
	Podman     bool   // podman-only flags (--runtime before run, --read-only-tmpfs)
	OCIRuntime string
	Name       string
	Owner      string
	Session    string
	Image      string
	User       string
	Memory     string
	Pids       int
	CPUs       string
	Nofile     uint64
	Nproc      uint64
	DataBytes  int64 // > 0 adds --ulimit data (rootless cgroup v1)
	Bootstrap  string
	// Mounts are the opt-in host folders (MCP_BRIDGE_MOUNTS); KeepID maps
	// the user's uid to the container user (rootless podman). See MountArgs.
	Mounts  []Mount
	KeepID  bool
	Seccomp string // seccomp profile file; "" keeps the runtime's default profile
	IDMap   *IDMap // per-session user namespace (podman); nil adds none
	// LinkFD hands the CLI's fd 3 (childproc.LinkFD, a socket) to the
	// container as the link
	// (podman --preserve-fds): frames then skip the CLI's and conmon's stdio
	// relay. Without it the link is the container's stdin and stdout.
	LinkFD bool
}

// ContainerArgv builds the full argv of a sandbox container (SPEC §6.2).
func ContainerArgv(s ArgvSpec) []string {
	a := []string{s.CLI}
	runsc := filepath.Base(s.OCIRuntime) == "runsc"
	if s.OCIRuntime != "" && s.Podman {
		a = append(a, "--runtime", s.OCIRuntime)
		if runsc {
			a = append(a, "--runtime-flag", "network=none")
		}
	}
	a = append(a, "run")
	if s.OCIRuntime != "" && !s.Podman {
		a = append(a, "--runtime", s.OCIRuntime)
	}
	a = append(a, "--rm")
	if s.LinkFD {
		a = append(a, "--preserve-fds", "1")
	} else {
		a = append(a, "-i")
	}
	a = append(a, "--init", "--pull", "never",
		"--name", s.Name, "--label", "bridge.owner="+s.Owner, "--label", "bridge.session="+s.Session,
		"--network", "none", "--read-only")
	if s.Podman {
		a = append(a, "--read-only-tmpfs=false")
	}
	a = append(a, "--cap-drop", "ALL", "--security-opt", "no-new-privileges")
	if s.Seccomp != "" {
		a = append(a, "--security-opt", "seccomp="+s.Seccomp)
	}
	if s.IDMap != nil {
		a = append(a, s.IDMap.Args()...)
	}
	a = append(a, "--user", s.User, "--memory", s.Memory, "--memory-swap", s.Memory, "--pids-limit", strconv.Itoa(s.Pids))
	if s.CPUs != "" {
		a = append(a, "--cpus", s.CPUs)
	}
	a = append(a, "--ulimit", fmt.Sprintf("nofile=%d:%d", s.Nofile, s.Nofile),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", s.Nproc, s.Nproc))
	if s.DataBytes > 0 {
		a = append(a, "--ulimit", fmt.Sprintf("data=%d:%d", s.DataBytes, s.DataBytes))
	}
	a = append(a,
		"--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=64m",
		"--tmpfs", "/workspace:rw,noexec,nosuid,nodev,size=128m")
	a = append(a, MountArgs(s.Mounts, s.Podman, s.KeepID, s.User)...)
	a = append(a, "--workdir", "/workspace", "--env", "HOME=/workspace", "--env", "PYTHONUNBUFFERED=1",
		"--env", "PYTHONDONTWRITEBYTECODE=1", "--env", "PYTHONIOENCODING=utf-8", "--log-driver", "none",
		s.Image, "python3", "-u", "-c", s.Bootstrap)
	if s.LinkFD {
		a = append(a, strconv.Itoa(childproc.LinkFD))
	}
	return a
}

// hardLimit returns min(1024, the hard rlimit) for CTR-1.
func hardLimit(resource int) uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(resource, &r); err != nil {
		return 1024
	}
	return min(1024, r.Max)
}

// Launcher starts sandboxes with the configured container CLI. It resolves
// the CLI lazily on first use, so the MCP handshake never waits for it.
type Launcher struct {
	cfg Config
	log zerolog.Logger

	mu        sync.Mutex // guards the fields below
	resolved  bool
	cli       string
	podman    bool
	oci       string // effective OCI runtime; may switch to runc (RT-3, settle)
	err       error
	pre       *RuntimeFacts // the facts findRuntime read while choosing the CLI, if it did
	unsettled bool          // the OCI runtime waits for the probe (ociUnsettled)

	probeOnce sync.Once    // guards facts: one runtime probe per process (RT-4)
	facts     RuntimeFacts // set by Facts
	probed    atomic.Bool  // facts are set

	confineOnce sync.Once
	seccomp     string    // profile path for --security-opt seccomp=; "" for the runtime's default
	ids         *idBlocks // per-session id maps; nil for none
	confineErr  error
}

// New returns a launcher for cfg.
func New(cfg Config, log zerolog.Logger) *Launcher {
	return &Launcher{cfg: cfg, log: log, oci: cfg.OCIRuntime}
}

// sandboxCommand is how to start one sandbox's process.
type sandboxCommand struct {
	argv []string
	name string // container name
	dir  string // working directory of the process
	// release frees what the launcher reserved for this container (its id
	// map); called once, after the container is gone.
	release func()
	// linkFD: the link is a socket the process gets as fd 3 (its stdout
	// then carries logs only); otherwise its stdin and stdout.
	linkFD bool
}

// command is how to start the sandbox of session.
func (l *Launcher) command(session string) (sandboxCommand, error) {
	l.settle()
	cli, podman, oci, err := l.resolve()
	if err != nil {
		return sandboxCommand{}, err
	}
	seccomp, ids, err := l.confinement(podman)
	if err != nil {
		return sandboxCommand{}, err
	}
	var idmap *IDMap
	release := func() {}
	if ids != nil {
		// Without a map the session still runs, sharing a host uid.
		if m, rel, err := ids.acquire(); err != nil {
			l.log.Warn().Err(err).Str("session", session).Msg("this session shares a host uid with others")
		} else {
			idmap, release = &m, rel
		}
	}
	name := fmt.Sprintf("bridge-%d-%s-%s", os.Getpid(), session, randHex(3))
	spec := ArgvSpec{
		CLI: cli, Podman: podman, OCIRuntime: oci, Name: name, Owner: l.cfg.Owner, Session: session,
		Image: l.cfg.Image, User: l.cfg.ContainerUser, Memory: l.cfg.Memory, Pids: l.cfg.Pids,
		CPUs: l.cfg.CPUs, Nofile: hardLimit(syscall.RLIMIT_NOFILE), Nproc: hardLimit(unix.RLIMIT_NPROC),
		Bootstrap: entrypoint.Bootstrap, Seccomp: seccomp, IDMap: idmap,
		Mounts: l.cfg.Mounts, KeepID: podman && os.Geteuid() != 0,
		LinkFD: SocketLink(l.cfg, cli, podman, oci),
	}
	fallbackLimits(l.limitFacts(podman), l.cfg, &spec)
	argv := ContainerArgv(spec)
	return sandboxCommand{argv: argv, name: name, dir: l.RunDir(), release: release, linkFD: spec.LinkFD}, nil
}

// SocketLink reports whether sandboxes get their link as a socket on fd 3
// (MCP_BRIDGE_LINK=auto): podman on Linux with a local engine passes it
// through conmon to the container. Docker cannot pass descriptors, a
// remote podman (podman machine, CONTAINER_HOST) runs the container on
// another kernel, and gVisor's runsc is left on the path it is known to
// handle; they keep the stdio link.
func SocketLink(cfg Config, cli string, podman bool, oci string) bool {
	if cfg.Link == "stdio" || !podman || runtime.GOOS != "linux" {
		return false
	}
	if os.Getenv("CONTAINER_HOST") != "" || os.Getenv("CONTAINER_CONNECTION") != "" ||
		strings.Contains(filepath.Base(cli), "remote") || filepath.Base(oci) == "runsc" {
		return false
	}
	return true
}

// limitFacts returns the runtime facts fallbackLimits reads, without
// waiting for the probe (`podman info` takes 0.5 s and more, on every cold
// start) when they are known here (localLimitFacts).
func (l *Launcher) limitFacts(podman bool) RuntimeFacts {
	if f, ok := localLimitFacts(podman); ok {
		return f
	}
	return l.Facts()
}

// remove force-removes a container by name (CLN-4), bounded by ctx.
func (l *Launcher) remove(ctx context.Context, name string) {
	if name == "" {
		return
	}
	argv := l.RemoveArgv(name)
	if argv == nil {
		return
	}
	out, err := l.RuntimeCommand(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "no such container") && !strings.Contains(string(out), "No such container") {
		l.log.Debug().Err(err).Str("container", name).Str("output", strings.TrimSpace(string(out))).Msg("container remove")
	}
}

// RemoveArgv is the command that force-removes the container name at once;
// nil for an unresolved runtime.
func (l *Launcher) RemoveArgv(name string) []string {
	if name == "" {
		return nil
	}
	cli, podman, _, err := l.resolve()
	if err != nil {
		return nil
	}
	argv := append(append([]string{cli}, l.GlobalArgs()...), "rm", "-f")
	if podman {
		argv = append(argv, "-t", "0") // docker rm has no stop timeout: -f kills at once
	}
	return append(argv, name)
}

// StartError turns the CLI's stderr before the ready frame into the
// user-facing error (CTR-5, CTR-6). retry is true when the launcher switched
// to runc after podman's hybrid-cgroup failure (RT-3).
func (l *Launcher) StartError(stderr string, exitCode int) (err error, retry bool) {
	cli, podman, _, _ := l.resolve()
	engine := "docker"
	if podman {
		engine = "podman"
	}
	if down := runtimeDown(engine, stderr); down != nil {
		return down, false
	}
	low := strings.ToLower(stderr)
	switch {
	case strings.Contains(low, "image not known") || strings.Contains(low, "no such image") ||
		strings.Contains(low, "unable to find image") || strings.Contains(low, "image not found"):
		return fmt.Errorf("Sandbox image '%s' is not available. Build it with `bridge image build`, or set MCP_BRIDGE_IMAGE to a local image with python3 3.11+.", l.cfg.Image), false
	case podman && strings.Contains(low, "cgroups in hybrid mode not supported"):
		if l.switchToRunc() {
			return nil, true
		}
	}
	msg := fmt.Sprintf("Container runtime '%s' failed to start the sandbox: %s", filepath.Base(cli), firstLine(stderr))
	if strings.Contains(low, "rlimit") || strings.Contains(low, "ulimit") {
		msg += " (ulimit values above the host's hard limits?)"
	}
	if strings.Contains(low, "unknown runtime specified") {
		msg += " (MCP_BRIDGE_OCI_RUNTIME names a runtime dockerd does not know: register it under \"runtimes\" in /etc/docker/daemon.json, or unset it)"
	}
	return errors.New(msg), false
}

func (l *Launcher) switchToRunc() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.OCIRuntime != "" || l.oci != "" {
		return false
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return false
	}
	l.oci = "runc"
	l.log.Warn().Msg("podman: cgroups in hybrid mode not supported by the default OCI runtime; using runc. Set MCP_BRIDGE_OCI_RUNTIME=runc to skip this retry")
	return true
}

// firstLine is the first non-empty line of s that is not a runtime's
// warning (rootless podman on cgroup v1 prints one before every error), the
// first warning when there is nothing else, "(no output)" when none.
func firstLine(s string) string {
	warning := ""
	for _, line := range strings.Split(s, "\n") {
		switch line = strings.TrimSpace(line); {
		case line == "":
		case strings.Contains(line, "level=warning") || strings.HasPrefix(line, "WARNING:") ||
			strings.HasPrefix(line, "Resource limits are not supported and ignored"):
			if warning == "" {
				warning = line
			}
		default:
			return line
		}
	}
	if warning != "" {
		return warning
	}
	return "(no output)"
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// VerifyArgs is the argv (from "run" to the image) of a throwaway container
// with every production flag, for image checks (IMG-4).
func (l *Launcher) VerifyArgs(img string) []string { return l.throwawayArgs(img, false) }

// SocketLinkArgs is VerifyArgs for a container that gets the socket link
// on fd 3 (the bench's socket floor); nil when this launcher's sandboxes
// keep the stdio link.
func (l *Launcher) SocketLinkArgs(img string) []string {
	l.settle()
	if cli, podman, oci, err := l.resolve(); err != nil || !SocketLink(l.cfg, cli, podman, oci) {
		return nil
	}
	return l.throwawayArgs(img, true)
}

// throwawayArgs is the argv from "run" to the image of a container with
// every production flag, its link as linkFD asks.
func (l *Launcher) throwawayArgs(img string, linkFD bool) []string {
	l.settle()
	cli, podman, oci, _ := l.resolve()
	// No id map: a block is held for a container's life, and this argv
	// outlives the call. The check container runs as the image's 65534.
	seccomp, _, _ := l.confinement(podman)
	spec := ArgvSpec{
		CLI: cli, Podman: podman, OCIRuntime: oci, Name: "bridge-check-" + randHex(4), Owner: l.cfg.Owner,
		Session: "check", Image: img, User: l.cfg.ContainerUser, Memory: l.cfg.Memory, Pids: l.cfg.Pids,
		CPUs: l.cfg.CPUs, Nofile: hardLimit(syscall.RLIMIT_NOFILE), Nproc: hardLimit(unix.RLIMIT_NPROC),
		Seccomp: seccomp, LinkFD: linkFD,
	}
	fallbackLimits(l.Facts(), l.cfg, &spec)
	argv := ContainerArgv(spec)
	// From "run" through the image: drop the global flags and the
	// entrypoint command (python3 -u -c <bootstrap>, and the link's
	// descriptor), which ends every argv.
	command := 4
	if linkFD {
		command++
	}
	return argv[slices.Index(argv, "run") : len(argv)-command]
}
