package container

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/thejerf/suture/v4"
)

// probeTimeout bounds one `info` call of the runtime probe (RT-4).
const probeTimeout = 15 * time.Second

// probeDelay is how long the background probe waits after startup where no
// container start needs its answer.
const probeDelay = 2 * time.Second

func knownHere(podman bool) bool {
	_, ok := localLimitFacts(podman)
	return ok
}

// LimitsKnown returns the facts the limits depend on without waiting: the
// probe's once it has answered, else the local ones (localLimitFacts).
func (l *Launcher) LimitsKnown() (RuntimeFacts, bool) {
	if f, ok := l.knownFacts(); ok {
		return f, true
	}
	if _, podman, _, err := l.resolve(); err == nil {
		return localLimitFacts(podman)
	}
	return RuntimeFacts{}, false
}

// RuntimeFacts are what the container engine reports about itself (RT-4):
// read once per process, in the background, by Launcher.Facts.
type RuntimeFacts struct {
	Engine   string   // "podman" or "docker"
	Version  string   // the engine's version (docker: the daemon's, not the client's)
	Rootless bool     // the engine runs containers without root
	Cgroup   string   // cgroup version: "1" or "2"
	Driver   string   // storage driver: overlay, overlay2, vfs, ...
	OCI      string   // the OCI runtime the engine uses by default
	Runtimes []string // docker: the OCI runtimes the daemon knows
	Err      error    // the engine could not be asked: not running, unreachable, misconfigured
}

// CgroupLimits reports whether cgroups enforce --memory, --pids-limit and
// --cpus. Rootless engines on cgroup v1 have no delegated cgroups and ignore
// them silently. Unknown facts count as enforced.
func (f RuntimeFacts) CgroupLimits() bool {
	return f.Err != nil || !f.Rootless || f.Cgroup != "1"
}

// Mode is "rootless" or "rootful".
func (f RuntimeFacts) Mode() string {
	if f.Rootless {
		return "rootless"
	}
	return "rootful"
}

// podmanInfo is the part of `podman info --format json` the probe reads.
type podmanInfo struct {
	Host struct {
		CgroupVersion string `json:"cgroupVersion"`
		OCIRuntime    struct {
			Name string `json:"name"`
		} `json:"ociRuntime"`
		Security struct {
			Rootless bool `json:"rootless"`
		} `json:"security"`
	} `json:"host"`
	Store struct {
		GraphDriverName string `json:"graphDriverName"`
	} `json:"store"`
	Version struct {
		Version string `json:"Version"`
	} `json:"version"`
}

// dockerInfo is the part of `docker info --format '{{json .}}'` the probe reads.
type dockerInfo struct {
	ServerVersion   string
	SecurityOptions []string
	CgroupVersion   string
	Driver          string
	DefaultRuntime  string
	Runtimes        map[string]json.RawMessage
	ServerErrors    []string
}

// ProbeRuntime asks cli (podman or docker, with the global flags global)
// for its facts. Only stdout is parsed: engines print warnings on stderr
// (rootless cgroup v1, "/" not a shared mount), which name no fact. A failure
// carries the engine's own error line and the fix, in one line.
func ProbeRuntime(ctx context.Context, cli string, global []string) RuntimeFacts {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	podman := strings.Contains(filepath.Base(cli), "podman")
	f := RuntimeFacts{Engine: "docker"}
	args := append(append([]string{}, global...), "info", "--format", "{{json .}}")
	if podman {
		f.Engine = "podman"
		args = append(append([]string{}, global...), "info", "--format", "json")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if podman {
		var info podmanInfo
		if err := json.Unmarshal(stdout.Bytes(), &info); err != nil || runErr != nil {
			f.Err = runtimeError(f.Engine, stderr.String(), firstErr(runErr, err))
			return f
		}
		f.Version = info.Version.Version
		f.Rootless = info.Host.Security.Rootless
		f.Cgroup = strings.TrimPrefix(info.Host.CgroupVersion, "v")
		f.Driver = info.Store.GraphDriverName
		f.OCI = info.Host.OCIRuntime.Name
		return f
	}
	var info dockerInfo
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil || runErr != nil || info.ServerVersion == "" {
		msg := stderr.String()
		if len(info.ServerErrors) > 0 {
			msg = strings.Join(info.ServerErrors, "\n") + "\n" + msg
		}
		f.Err = runtimeError(f.Engine, msg, firstErr(runErr, err))
		return f
	}
	f.Version = info.ServerVersion
	for _, o := range info.SecurityOptions {
		f.Rootless = f.Rootless || o == "name=rootless"
	}
	f.Cgroup = info.CgroupVersion
	f.Driver = info.Driver
	f.OCI = info.DefaultRuntime
	for name := range info.Runtimes {
		f.Runtimes = append(f.Runtimes, name)
	}
	sort.Strings(f.Runtimes)
	return f
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return errors.New("no output")
}

// runtimeError turns a failed `info` into one line: what failed and the fix.
func runtimeError(engine, stderr string, err error) error {
	if down := runtimeDown(engine, stderr); down != nil {
		return down
	}
	line := ErrorLine(stderr)
	if line == "" {
		line = err.Error()
	}
	low := strings.ToLower(stderr)
	if strings.Contains(low, "newuidmap") || strings.Contains(low, "subuid") || strings.Contains(low, "subgid") {
		return fmt.Errorf("%s info: %s; give your user subuid/subgid ranges (`sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER`) and run `podman system migrate`", engine, line)
	}
	return fmt.Errorf("%s info: %s", engine, line)
}

// ErrorLine is the first stderr line that is not a warning, else the first line.
func ErrorLine(stderr string) string {
	var first string
	for _, line := range strings.Split(stderr, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		if !strings.Contains(line, "level=warning") && !strings.HasPrefix(strings.ToLower(line), "warning") {
			return line
		}
	}
	return first
}

// Facts probes the runtime once per process (RT-4) and returns the facts.
// Concurrent callers wait for the one probe, which is bounded by
// probeTimeout; later callers get the stored facts at once.
func (l *Launcher) Facts() RuntimeFacts {
	l.probeOnce.Do(func() {
		defer l.probed.Store(true)
		cli, podman, _, err := l.resolve()
		if err != nil {
			l.facts = RuntimeFacts{Err: err}
			return
		}
		l.mu.Lock()
		pre := l.pre
		l.mu.Unlock()
		if pre != nil {
			l.facts = *pre
		} else {
			// The engine's defaults, not settle's choice: settle waits for this.
			l.facts = ProbeRuntime(context.Background(), cli, CLIGlobalArgs(cli, podman, l.cfg.OCIRuntime))
		}
		switch f := l.facts; {
		case f.Err != nil:
			l.log.Error().Err(f.Err).Msg("container runtime")
		case !f.CgroupLimits():
			l.log.Warn().Msg(l.LimitsWarning(f))
		}
		l.chooseOCI(l.facts)
	})
	return l.facts
}

// knownFacts returns the facts without waiting: ok is false until the probe
// has finished.
func (l *Launcher) knownFacts() (RuntimeFacts, bool) {
	if !l.probed.Load() {
		return RuntimeFacts{}, false
	}
	return l.facts, true
}

// LimitsWarning is the one line that tells the user which limits of this
// launcher's containers are not enforced by cgroups under f and what holds
// instead; "" when cgroups enforce all.
func (l *Launcher) LimitsWarning(f RuntimeFacts) string {
	cfg := l.cfg
	if f.CgroupLimits() {
		return ""
	}
	return fmt.Sprintf("%s %s on cgroup v1 cannot enforce --memory, --pids-limit or --cpus; "+
		"the sandbox is held by per-process ulimits instead (data=%s, nproc=%d) and CPU is not limited; "+
		"use cgroup v2 or rootful %s for real limits", f.Mode(), f.Engine, cfg.Memory, cfg.Pids, f.Engine)
}

// Serve implements suture.Service: it probes the runtime in the background
// at startup (RT-4), logs a missing runtime or image, and ends.
func (l *Launcher) Serve(ctx context.Context) error {
	// Where no container command waits for the facts (limitFacts, settle),
	// the probe (`podman info`: 0.5 s and more of CPU) waits until the
	// first container has started, like the startup sweep; a bridge exec
	// that is done by then never runs it.
	if _, podman, _, err := l.resolve(); err == nil && knownHere(podman) && !l.ociUnsettled(podman) {
		select {
		case <-time.After(probeDelay):
		case <-ctx.Done():
			return suture.ErrDoNotRestart
		}
	}
	f := l.Facts()
	if f.Err != nil {
		return suture.ErrDoNotRestart
	}
	cli, _ := l.CLI()
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	args := append(l.GlobalArgs(), "image", "inspect", "--format", "{{.Id}}", l.cfg.Image)
	if err := exec.CommandContext(cctx, cli, args...).Run(); err != nil && cctx.Err() == nil {
		l.log.Error().Str("image", l.cfg.Image).Msg("sandbox image missing; build it with `" + BuildCommand(l.cfg.Image) + "`")
	}
	return suture.ErrDoNotRestart
}

// String names the service for suture's logs.
func (l *Launcher) String() string { return "runtime-probe" }

// BuildCommand is the command that builds image.
func BuildCommand(image string) string {
	if image == DefaultImage {
		return "bridge image build"
	}
	return "bridge image build --tag " + image
}

// fallbackLimits applies the ulimit fallbacks where cgroups cannot enforce
// limits (RT-4): --ulimit data bounds each process's heap at the memory
// limit and nproc bounds the processes at the pids limit.
func fallbackLimits(f RuntimeFacts, cfg Config, s *ArgvSpec) {
	if f.CgroupLimits() {
		return
	}
	s.DataBytes = cfg.MemoryBytes
	s.Nproc = min(s.Nproc, uint64(cfg.Pids))
}

// resolve finds the container CLI once (RT-1).
func (l *Launcher) resolve() (cli string, podman bool, oci string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.resolved {
		l.resolved = true
		l.cli, l.pre, l.err = findRuntime(context.Background(), l.cfg.Runtime, l.cfg.OCIRuntime)
		l.podman = strings.Contains(filepath.Base(l.cli), "podman")
		l.unsettled = l.podman && l.cfg.OCIRuntime == "" && hybridCgroups() && crunPossible()
	}
	return l.cli, l.podman, l.oci, l.err
}

// CLI returns the resolved container CLI, or ErrNoRuntime.
func (l *Launcher) CLI() (string, error) {
	cli, _, _, err := l.resolve()
	return cli, err
}

// GlobalArgs returns the flags that go before the subcommand: podman's
// --runtime, and for runsc the network flag gVisor needs (RT-2). It
// settles the OCI runtime first, so that image builds, checks and the
// bench run their containers as the sessions do.
func (l *Launcher) GlobalArgs() []string {
	l.settle()
	cli, podman, oci, _ := l.resolve()
	return CLIGlobalArgs(cli, podman, oci)
}
