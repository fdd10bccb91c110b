package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bridge-mcp/bridge/engine/container"
	"github.com/bridge-mcp/bridge/engine/image"
)

// doctorRuntime checks the container engine and the image (RT-4: doctor
// probes again). Every problem line carries its fix. Only the runtime's
// stdout is parsed; its stderr only explains failures.
func (e *Engine) doctorRuntime(ctx context.Context, add func(string, string, string, ...any)) {
	if e.Kube != nil {
		e.Kube.Doctor(ctx, add)
		return
	}
	if e.Container == nil {
		add("FAIL", "runtime", "MCP_BRIDGE_RUNTIME=local runs code on the host with no isolation (tests only)")
		return
	}
	cli, err := e.Container.CLI()
	if err != nil {
		add("FAIL", "runtime", "%v (Linux: `sudo apt-get install podman` or Docker Engine; macOS: Podman Desktop or Docker Desktop)", err)
		return
	}
	// The engine's own defaults: the OCI runtime line below says what the
	// bridge chooses instead, and why.
	podman := strings.Contains(filepath.Base(cli), "podman")
	f := container.ProbeRuntime(ctx, cli, container.CLIGlobalArgs(cli, podman, e.Env.OCIRuntime))
	if f.Err != nil {
		add("FAIL", "runtime", "%s: %v", cli, f.Err)
		return
	}
	oci := f.OCI
	if e.Env.OCIRuntime != "" {
		oci = e.Env.OCIRuntime + " (MCP_BRIDGE_OCI_RUNTIME)"
	}
	add("OK", "runtime", "%s %s (%s), %s, OCI runtime %s", f.Engine, f.Version, cli, f.Mode(), oci)
	if msg := ociRuntimeProblem(f, e.Env.OCIRuntime); msg != "" {
		add("FAIL", "oci runtime", "%s", msg)
	}
	switch oci, problem := container.HybridOCI(f, e.Env.OCIRuntime); {
	case oci != "":
		add("OK", "oci runtime", "podman's default %s cannot start containers on this host's hybrid cgroups; sessions, image builds and the bench use %s", f.OCI, oci)
	case problem != "":
		add("FAIL", "oci runtime", "%s", problem)
	}
	status, detail := storageCheck(f)
	add(status, "storage", "%s", detail)
	if w := e.Container.LimitsWarning(f); w != "" {
		add("WARN", "limits", "%s", w)
	} else {
		add("OK", "limits", "cgroup v%s, %s: --memory, --pids-limit and --cpus are enforced", f.Cgroup, f.Mode())
	}
	if f.Engine == "podman" && os.Geteuid() == 0 && filepath.Base(e.Env.OCIRuntime) != "runsc" {
		if msg := container.ContainersRangeProblem("/etc/subuid", "/etc/subgid"); msg != "" {
			add("WARN", "subuid", "rootful podman: %s", msg)
		} else {
			add("OK", "subuid", "the 'containers' subuid and subgid ranges give each session its own host uids")
		}
	}
	if f.Engine == "podman" && os.Geteuid() != 0 {
		if msg := subIDProblem(); msg != "" {
			add("FAIL", "subuid", "%s", msg)
		} else {
			add("OK", "subuid", "subuid and subgid ranges for the current user are set")
		}
	}
	e.doctorMounts(add)
	e.doctorImage(ctx, cli, add)
}

// ociRuntimeProblem names an OCI runtime the engine will not find, with the
// fix; "" when it is found (or none is configured).
func ociRuntimeProblem(f container.RuntimeFacts, oci string) string {
	if oci == "" {
		return ""
	}
	if f.Engine == "docker" {
		if slices.Contains(f.Runtimes, oci) {
			return ""
		}
		return fmt.Sprintf("docker %s does not know the runtime %q (MCP_BRIDGE_OCI_RUNTIME; known: %s): register it under \"runtimes\" in /etc/docker/daemon.json and restart dockerd, or unset MCP_BRIDGE_OCI_RUNTIME",
			f.Version, oci, strings.Join(f.Runtimes, ", "))
	}
	if container.OCIFound(oci) {
		return ""
	}
	return fmt.Sprintf("OCI runtime %q (MCP_BRIDGE_OCI_RUNTIME) not found: install it (e.g. `sudo apt-get install %s`) or unset MCP_BRIDGE_OCI_RUNTIME", oci, filepath.Base(oci))
}

// storageCheck reports the storage driver: vfs copies the whole image at
// every container start, which makes each new session take seconds.
func storageCheck(f container.RuntimeFacts) (status, detail string) {
	if f.Driver != "vfs" {
		return "OK", fmt.Sprintf("%s storage driver %s", f.Engine, f.Driver)
	}
	if f.Engine == "docker" {
		return "WARN", `docker storage driver vfs copies the whole image at every container start (seconds per session): set "storage-driver": "overlay2" in /etc/docker/daemon.json, restart dockerd, then run ` + "`bridge image build`"
	}
	conf := "/etc/containers/storage.conf"
	if f.Rootless {
		conf = "~/.config/containers/storage.conf"
	}
	return "WARN", fmt.Sprintf(`podman storage driver vfs copies the whole image at every container start (seconds per session): put [storage] driver = "overlay" in %s, then `+"`podman system reset`"+` (removes all images and containers) and `+"`bridge image build`", conf)
}

// subIDProblem checks /etc/subuid and /etc/subgid for a range of the current
// user, which rootless podman needs; "" when both have one.
func subIDProblem() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	var missing []string
	for _, file := range []string{"/etc/subuid", "/etc/subgid"} {
		if !hasSubIDRange(file, u.Username, u.Uid) {
			missing = append(missing, file)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("no range for %s in %s: rootless podman needs one; run `sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s`, then `podman system migrate`",
		u.Username, strings.Join(missing, " and "), u.Username)
}

// hasSubIDRange reports whether file has a line "name:start:count" or
// "uid:start:count" with count > 0.
func hasSubIDRange(file, name, uid string) bool {
	_, _, ok := container.SubIDRange(file, name, uid)
	return ok
}

// doctorImage checks that the image exists and is current, then runs it once
// with every production flag and reports its Python, libraries and size.
func (e *Engine) doctorImage(ctx context.Context, cli string, add func(string, string, string, ...any)) {
	img := e.Env.Image
	global := e.Container.GlobalArgs()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, cli, append(append([]string{}, global...), "image", "inspect", "--format", "{{json .Config.Labels}} {{.Size}}", img)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		add("FAIL", "image", "%s is not available: build it with `%s` (%s)", img, container.BuildCommand(img), container.ErrorLine(stderr.String()))
		return
	}
	labelsJSON, sizeText, _ := strings.Cut(strings.TrimSpace(stdout.String()), " ")
	var labels map[string]string
	_ = json.Unmarshal([]byte(labelsJSON), &labels)
	size, _ := strconv.ParseInt(sizeText, 10, 64)

	args := append(append([]string{}, global...), e.Container.VerifyArgs(img)...)
	args = append(args, "python3", "-c", image.VerifyScript)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	stdout.Reset()
	stderr.Reset()
	run := exec.CommandContext(cctx, cli, args...)
	run.Stdout, run.Stderr = &stdout, &stderr
	start := time.Now()
	err := run.Run()
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		if msg, _ := e.Container.StartError(stderr.String(), -1); msg != nil && !strings.Contains(stderr.String(), "Traceback") && !strings.Contains(stderr.String(), "too old") {
			add("FAIL", "image", "%s: %v", img, msg)
		} else {
			add("FAIL", "image", "%s lacks what the sandbox needs (%s): rebuild it with `%s`", img, lastLine(stderr.String()), container.BuildCommand(img))
		}
		return
	}
	v, err := image.ParseVersions(stdout.Bytes())
	if err != nil {
		add("FAIL", "image", "%s: %v: rebuild it with `%s`", img, err, container.BuildCommand(img))
		return
	}
	if !pythonAtLeast311(v["python"]) {
		add("FAIL", "image", "Sandbox image '%s' has Python %s; 3.11+ is required", img, v["python"])
		return
	}
	var parts []string
	for _, k := range image.VersionKeys[1:] {
		parts = append(parts, k+" "+v[k])
	}
	origin := ""
	if suite := labels[image.SuiteLabel]; suite != "" {
		origin = ", Debian " + suite
	}
	add("OK", "image", "%s: Python %s with %s; %.0f MB%s; throwaway container with all flags in %v",
		img, v["python"], strings.Join(parts, ", "), float64(size)/1e6, origin, took)
	if got := labels[image.SchemaKey]; got != image.Schema {
		add("WARN", "image age", "%s has %s=%q, this bridge builds %s (Python 3.13+, numpy 2, pandas 2): rebuild it with `%s`",
			img, image.SchemaKey, got, image.Schema, container.BuildCommand(img))
	}
}

func pythonAtLeast311(v string) bool {
	var a, b int
	if _, err := fmt.Sscanf(v, "%d.%d", &a, &b); err != nil {
		return false
	}
	return a > 3 || (a == 3 && b >= 11)
}

// lastLine is the last non-blank line of a command's stderr, where Python
// puts a traceback's error.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}

// doctorMounts checks that the sandbox can write each read-write mount's
// host folder, as the runtime maps the sandbox user.
func (e *Engine) doctorMounts(add func(string, string, string, ...any)) {
	var w *container.Writer
	for _, m := range e.Env.Mounts {
		if !m.RW {
			continue
		}
		if w == nil {
			mw := e.Container.MountWriter()
			w = &mw
		}
		if w.Writable(m.Host) {
			add("OK", "mounts", "%s (rw) is %s, which the sandbox can write (%s)", m.Container, m.Host, w.Why)
			continue
		}
		add("FAIL", "mounts", "%s (rw) is %s, which the sandbox cannot write (%s): %s", m.Container, m.Host, w.Why, w.Fix(m.Host))
	}
}
