package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// findRuntime finds the container CLI (RT-1): MCP_BRIDGE_RUNTIME when set,
// else the first of podman and docker on PATH that answers its `info`, as
// `go tool task setup:runtime` decides: a docker CLI whose daemon is down
// is no runtime while a podman that answers is there. With one of them on
// PATH it is taken without asking (its probe reports what is wrong, with
// the fix); with none answering, the first found. probed holds the chosen
// CLI's facts when they were read here, so the launcher does not ask again.
func findRuntime(ctx context.Context, name, oci string) (cli string, probed *RuntimeFacts, err error) {
	if name != "" {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", nil, fmt.Errorf("container runtime %q (MCP_BRIDGE_RUNTIME) not found: %w", name, err)
		}
		return p, nil, nil
	}
	var found []string
	for _, n := range []string{"podman", "docker"} {
		if p, err := exec.LookPath(n); err == nil {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", nil, ErrNoRuntime
	case 1:
		return found[0], nil, nil
	}
	podman, docker := found[0], found[1]
	// A docker CLI with no sign of a daemon (no DOCKER_HOST or
	// DOCKER_CONTEXT, no context store, no default socket) cannot answer:
	// podman is the runtime, and no bridge start pays `docker info`.
	if !dockerDaemonPossible() {
		return podman, nil, nil
	}
	// docker first: a daemon that is down answers in milliseconds, where
	// `podman info` takes half a second. Only when docker answers does
	// podman's answer decide between them.
	df := ProbeRuntime(ctx, docker, nil)
	if df.Err != nil {
		return podman, nil, nil
	}
	pf := ProbeRuntime(ctx, podman, CLIGlobalArgs(podman, true, oci))
	if pf.Err != nil {
		return docker, &df, nil
	}
	return podman, &pf, nil
}

// dockerSocket is the Docker daemon's default endpoint; a variable so
// tests can point it elsewhere.
var dockerSocket = "/var/run/docker.sock"

// dockerDaemonPossible reports whether the docker CLI could reach a daemon:
// an endpoint is set (DOCKER_HOST, DOCKER_CONTEXT, a context store under
// DOCKER_CONFIG or ~/.docker), or the default socket exists. Only then is
// `docker info` worth its cost.
func dockerDaemonPossible() bool {
	if os.Getenv("DOCKER_HOST") != "" || os.Getenv("DOCKER_CONTEXT") != "" {
		return true
	}
	cfg := os.Getenv("DOCKER_CONFIG")
	if cfg == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cfg = filepath.Join(home, ".docker")
		}
	}
	if cfg != "" {
		if _, err := os.Stat(filepath.Join(cfg, "contexts", "meta")); err == nil {
			return true
		}
	}
	_, err := os.Stat(dockerSocket)
	return err == nil
}

// CLIGlobalArgs are the flags that go before the subcommand of cli run
// with the OCI runtime oci: podman's --runtime, and for runsc the network
// flag gVisor needs (RT-2).
func CLIGlobalArgs(cli string, podman bool, oci string) []string {
	argv := ContainerArgv(ArgvSpec{CLI: cli, Podman: podman, OCIRuntime: oci})
	if i := slices.Index(argv, "run"); i > 1 {
		return argv[1:i]
	}
	return nil
}

// hybridOCI decides the OCI runtime of every container (sessions, image
// checks, the bench) where the engine's default cannot start any: podman's
// crun refuses hybrid cgroups (v1 controllers beside a v2 "unified" mount)
// with "cgroups in hybrid mode not supported", and Debian's podman picks
// crun whenever it is installed. oci is "runc" when that is the way out;
// problem, when runc is missing too, is the one line with the fix. Both
// are "" where the default works, or the user chose (MCP_BRIDGE_OCI_RUNTIME).
func hybridOCI(f RuntimeFacts, chosen string, hybrid bool) (oci, problem string) {
	if f.Err != nil || f.Engine != "podman" || chosen != "" || !hybrid || filepath.Base(f.OCI) != "crun" {
		return "", ""
	}
	if OCIFound("runc") {
		return "runc", ""
	}
	return "", "podman's default OCI runtime crun cannot start containers on this host's hybrid cgroups (v1 with a v2 unified mount): " +
		"install runc (`sudo apt-get install runc`) or set MCP_BRIDGE_OCI_RUNTIME to a runtime that can"
}

// ociDirs are where podman looks for an OCI runtime besides PATH. A
// variable for tests.
var ociDirs = []string{"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/usr/libexec/podman"}

// OCIFound reports whether podman finds the OCI runtime oci: a path that
// exists, a name on PATH or in the directories podman looks in.
func OCIFound(oci string) bool {
	if filepath.IsAbs(oci) {
		_, err := os.Stat(oci)
		return err == nil
	}
	if _, err := exec.LookPath(oci); err == nil {
		return true
	}
	for _, dir := range ociDirs {
		if _, err := os.Stat(filepath.Join(dir, oci)); err == nil {
			return true
		}
	}
	return false
}

// settle makes the choices that must hold before the first container
// starts. Where podman's default OCI runtime may be unable to start any
// (hybridOCI), that needs the probe's answer, so this waits for it
// (bounded by probeTimeout); elsewhere it returns at once.
func (l *Launcher) settle() {
	if _, podman, _, err := l.resolve(); err == nil && l.ociUnsettled(podman) {
		l.Facts()
	}
}

// ociUnsettled reports whether the OCI runtime of this launcher's
// containers waits for the probe (settle): podman on hybrid cgroups with
// no MCP_BRIDGE_OCI_RUNTIME, where podman may default to crun. Decided
// once, by resolve.
func (l *Launcher) ociUnsettled(podman bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return podman && l.unsettled
}

// crunPossible reports whether podman may default to crun: a crun where
// podman looks for one, or a line of a containers.conf that names it
// outside a comment. Elsewhere its default is runc, and no container
// waits for the probe (`podman info` adds half a second to every cold
// start). A variable for tests.
var crunPossible = func() bool {
	if OCIFound("crun") {
		return true
	}
	for _, f := range containersConfs() {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); !strings.HasPrefix(line, "#") && strings.Contains(line, "crun") {
				return true
			}
		}
	}
	return false
}

// containersConfs are the containers.conf files podman reads: the one
// CONTAINERS_CONF names instead of the others, else the system's and the
// user's with their drop-in directories; CONTAINERS_CONF_OVERRIDE last.
func containersConfs() []string {
	var files []string
	if f := os.Getenv("CONTAINERS_CONF"); f != "" {
		files = append(files, f)
	} else {
		dirs := []string{"/usr/share/containers", "/etc/containers"}
		if dir, err := os.UserConfigDir(); err == nil {
			dirs = append(dirs, filepath.Join(dir, "containers"))
		}
		for _, dir := range dirs {
			files = append(files, filepath.Join(dir, "containers.conf"))
			dropIns, _ := filepath.Glob(filepath.Join(dir, "containers.conf.d", "*.conf"))
			files = append(files, dropIns...)
		}
	}
	if f := os.Getenv("CONTAINERS_CONF_OVERRIDE"); f != "" {
		files = append(files, f)
	}
	return files
}

// HybridOCI is hybridOCI on this host's cgroups: the OCI runtime every
// container gets where the engine's default cannot start any, or the
// problem with its fix; chosen is MCP_BRIDGE_OCI_RUNTIME.
func HybridOCI(f RuntimeFacts, chosen string) (oci, problem string) {
	return hybridOCI(f, chosen, hybridCgroups())
}

// chooseOCI applies hybridOCI to the probe's facts, once, before any
// container of this process has used the OCI runtime (settle).
func (l *Launcher) chooseOCI(f RuntimeFacts) {
	oci, problem := HybridOCI(f, l.cfg.OCIRuntime)
	switch {
	case oci != "":
		l.mu.Lock()
		if l.oci == "" {
			l.oci = oci
		}
		l.mu.Unlock()
		l.log.Info().Str("oci", oci).Msg("podman's default OCI runtime crun cannot start containers on this host's hybrid cgroups; using runc (MCP_BRIDGE_OCI_RUNTIME chooses another)")
	case problem != "":
		l.log.Error().Msg(problem)
	}
}

// ContainersRangeProblem is the doctor's warning for rootful podman when
// subuid or subgid (the files /etc/subuid and /etc/subgid) have no range
// for the user "containers": every session then runs as the same host uid,
// sharing its keyrings and per-user limits; "" when both have one.
func ContainersRangeProblem(subuid, subgid string) string {
	if _, ok := newIDBlocks(subuid, subgid, ""); ok {
		return ""
	}
	return fmt.Sprintf("%s and %s have no range of at least %d ids for the user 'containers', so every session runs as the same host uid "+
		"(shared keyrings and per-user limits): add the line 'containers:2147483647:2147483648' to both files (`go tool task setup:podman` does)",
		subuid, subgid, idBlockSize)
}

// runtimeDown is the one line for a runtime whose engine does not answer,
// with the fix, from its error output (stderr of `info` or of `run`); nil
// when the output says something else.
func runtimeDown(engine, stderr string) error {
	line := ErrorLine(stderr)
	low := strings.ToLower(stderr)
	switch {
	case engine == "docker" && strings.Contains(low, "permission denied") && strings.Contains(low, "docker"):
		return fmt.Errorf("docker daemon not reachable: %s; add your user to the docker group (`sudo usermod -aG docker $USER`, then log in again) or use rootless docker", line)
	case engine == "docker" && (strings.Contains(low, "cannot connect to the docker daemon") || strings.Contains(low, "is the docker daemon running") ||
		strings.Contains(low, "docker.sock: connect")):
		return fmt.Errorf("Docker daemon not running: start it, or install podman (`sudo systemctl start docker` or Docker Desktop; `sudo apt-get install podman uidmap`): %s", line)
	case engine == "podman" && (strings.Contains(low, "podman machine") || strings.Contains(low, "unable to connect to podman")):
		return fmt.Errorf("podman machine not running: %s; run `podman machine start` (once: `podman machine init`)", line)
	}
	return nil
}
