package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
