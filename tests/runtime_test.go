package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestRuntimeAutoDetect: with MCP_BRIDGE_RUNTIME unset and the runtime
// under test on PATH (podman's helpers beside it), the bridge finds that
// runtime (RT-1), runs code in its container, and leaves none behind. With
// podman, a docker CLI that cannot reach a daemon is on PATH too: it does
// not count as a runtime.
func TestRuntimeAutoDetect(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	bridgeOnHost(t) // what it finds on the host's PATH
	dir := t.TempDir()
	extra := map[string]string{"PATH": dir, "MCP_BRIDGE_RUNTIME": ""}
	if runtimeCLI() == "podman" {
		extra["DOCKER_HOST"] = deadDocker(t, dir)
	}
	for _, name := range []string{runtimeCLI(), "newuidmap", "newgidmap", "fuse-overlayfs", "slirp4netns", "conmon", "runc", "crun"} {
		if name != runtimeCLI() && runtimeCLI() == "docker" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := startBridge(t, extra)
	b.expectText("print(1)", "1", false)
	out, err := exec.Command(runtimeCLI(), "ps", "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("%s ps: %v", runtimeCLI(), err)
	}
	prefix := "bridge-" + strconv.Itoa(b.pid()) + "-"
	if !strings.Contains(string(out), prefix) {
		t.Errorf("%s ps lists no container %s*:\n%s", runtimeCLI(), prefix, out)
	}
}

// deadDocker puts into dir a docker CLI that cannot reach a daemon: the
// real one when installed, with DOCKER_HOST (returned) naming a socket no
// daemon listens on, else a stub that fails as it does.
func deadDocker(t *testing.T, dir string) (dockerHost string) {
	t.Helper()
	dockerHost = "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock")
	if p, err := exec.LookPath("docker"); err == nil {
		if err := os.Symlink(p, filepath.Join(dir, "docker")); err != nil {
			t.Fatal(err)
		}
		return dockerHost
	}
	stub := "#!/bin/sh\necho \"Cannot connect to the Docker daemon at $DOCKER_HOST. Is the docker daemon running?\" >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	return dockerHost
}

// TestRuntimeNotAnswering: on a machine whose PATH has a docker CLI that
// cannot reach a daemon and no podman, there is no runtime: doctor FAILs
// naming the fix, and the first call fails with one line naming it.
func TestRuntimeNotAnswering(t *testing.T) {
	dir := t.TempDir()
	extra := map[string]string{"PATH": dir, "MCP_BRIDGE_RUNTIME": "", "DOCKER_HOST": deadDocker(t, dir), "MCP_BRIDGE_LOG_LEVEL": "error"}
	const fix = "Docker daemon not running: start it, or install podman ("
	out, errOut, code := runCLI(t, extra, "", "doctor")
	if code != 1 || !strings.Contains(out, "FAIL runtime: "+filepath.Join(dir, "docker")+": "+fix) {
		t.Errorf("doctor: exit %d, want 1 and a FAIL runtime line with %q:\n%s%s", code, fix, out, errOut)
	}
	start := time.Now()
	out, errOut, code = runCLI(t, extra, "", "exec", "print(1)")
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Docker daemon") {
			lines = append(lines, line)
		}
	}
	if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "Sandbox error: "+fix) {
		t.Errorf("exec: exit %d, lines %q; want 1 and one line with %q:\n%s%s", code, lines, fix, out, errOut)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("exec took %v to fail", took)
	}
}

// TestContainerFlags inspects a live session container with the runtime's
// own inspect: the security flags of SPEC §6.2 are applied as the engine
// sees them (not only passed on argv), and where cgroups cannot enforce the
// limits the ulimit fallbacks are there instead (RT-4).
func TestContainerFlags(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MEMORY": "256m", "MCP_BRIDGE_PIDS": "100"})
	b.expectText("print(1)", "1", false)
	names := bridgeContainerIDs(b.pid())
	if len(names) == 0 {
		t.Fatal("no container of the bridge is running")
	}
	out, err := exec.Command(runtimeCLI(), "inspect", "--format", "{{json .HostConfig}}", names[0]).Output()
	if err != nil {
		t.Fatalf("%s inspect: %v", runtimeCLI(), err)
	}
	var hc struct {
		ReadonlyRootfs bool
		Privileged     bool
		CapDrop        []string
		CapAdd         []string
		SecurityOpt    []string
		NetworkMode    string
		Memory         int64
		PidsLimit      int64
		Binds          []string
		Ulimits        []struct {
			Name       string
			Soft, Hard int64
		}
		Tmpfs map[string]string
	}
	if err := json.Unmarshal(out, &hc); err != nil {
		t.Fatalf("HostConfig %s: %v", out, err)
	}
	dropsAll := slices.Contains(hc.CapDrop, "ALL") || slices.Contains(hc.CapDrop, "all") || len(hc.CapDrop) >= 10
	if !hc.ReadonlyRootfs || hc.Privileged || !dropsAll || len(hc.CapAdd) != 0 || hc.NetworkMode != "none" || len(hc.Binds) != 0 {
		t.Errorf("HostConfig: readonly %v, privileged %v, capDrop %v, capAdd %v, network %q, binds %v",
			hc.ReadonlyRootfs, hc.Privileged, hc.CapDrop, hc.CapAdd, hc.NetworkMode, hc.Binds)
	}
	if !slices.ContainsFunc(hc.SecurityOpt, func(s string) bool { return strings.HasPrefix(s, "no-new-privileges") }) {
		t.Errorf("SecurityOpt %v lacks no-new-privileges", hc.SecurityOpt)
	}
	if _, ok := hc.Tmpfs["/workspace"]; !ok {
		t.Errorf("Tmpfs %v lacks /workspace", hc.Tmpfs)
	}
	ulimits := map[string]int64{}
	for _, u := range hc.Ulimits {
		ulimits[strings.TrimPrefix(strings.ToLower(u.Name), "rlimit_")] = u.Hard
	}
	if cgroupLimits(t) {
		if hc.Memory != 256<<20 || hc.PidsLimit != 100 {
			t.Errorf("memory %d, pids %d; want %d and 100", hc.Memory, hc.PidsLimit, 256<<20)
		}
	} else if ulimits["data"] != 256<<20 || ulimits["nproc"] != 100 {
		t.Errorf("ulimits %v; want data=%d and nproc=100 where cgroups cannot enforce limits", ulimits, 256<<20)
	}
	if n := ulimits["nofile"]; n == 0 || n > 1024 {
		t.Errorf("ulimits %v; want nofile <= 1024", ulimits)
	}
}

// TestLimitsWarning: where cgroups cannot enforce the limits (rootless
// cgroup v1), the first result of each session carries the one-line warning
// and later results do not; elsewhere no result carries it (RT-4).
func TestLimitsWarning(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	enforced := cgroupLimits(t)
	b := startBridge(t, nil)
	for i, c := range []struct {
		session string
		want    bool
	}{{"default", !enforced}, {"default", false}, {"other", !enforced}, {"other", false}} {
		r := b.call(map[string]any{"code": "print('x')", "session": c.session})
		raw := r.Content[0].(mcp.TextContent).Text
		got := limitsNote.MatchString(raw)
		if got != c.want {
			t.Errorf("result %d (session %s): warning %v, want %v: %q", i, c.session, got, c.want, raw)
		}
		if got && strings.Count(raw, "\n") != 1 {
			t.Errorf("result %d: %q, want the output and one warning line", i, raw)
		}
	}
}
