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

	"github.com/mark3labs/mcp-go/mcp"
)

// TestRuntimeAutoDetect: with MCP_BRIDGE_RUNTIME unset and only the runtime
// under test on PATH (podman's helpers beside it), the bridge finds that
// runtime (RT-1), runs code in its container, and leaves none behind.
func TestRuntimeAutoDetect(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	dir := t.TempDir()
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
	b := startBridge(t, map[string]string{"PATH": dir, "MCP_BRIDGE_RUNTIME": ""})
	b.expectText("print(1)", "1", false)
	out, err := exec.Command(runtimeCLI(), "ps", "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("%s ps: %v", runtimeCLI(), err)
	}
	prefix := "bridge-" + strconv.Itoa(b.cmd.Process.Pid) + "-"
	if !strings.Contains(string(out), prefix) {
		t.Errorf("%s ps lists no container %s*:\n%s", runtimeCLI(), prefix, out)
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
	names := bridgeContainerIDs(b.cmd.Process.Pid)
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
