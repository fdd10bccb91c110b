package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// crunConf writes a containers.conf that makes podman default to the crun
// of BRIDGE_TEST_CRUN, as Debian's podman does when crun is installed, and
// returns its path. crun is never installed on the host for this (podman
// would then pick it for every other test): `go tool task setup:crun`
// unpacks Debian's package into a directory of its own.
func crunConf(t *testing.T) string {
	t.Helper()
	crun := os.Getenv("BRIDGE_TEST_CRUN")
	if crun == "" {
		if home, err := os.UserHomeDir(); err == nil {
			crun = filepath.Join(home, ".cache", "bridge-crun", "crun")
		}
	}
	if _, err := os.Stat(crun); err != nil {
		t.Fatalf("crun is required (BRIDGE_TEST_CRUN; `go tool task setup:crun` provides it): %v", err)
	}
	conf := filepath.Join(t.TempDir(), "containers.conf")
	data := "[engine]\nruntime = \"crun\"\n\n[engine.runtimes]\ncrun = [\"" + crun + "\"]\n"
	if err := os.WriteFile(conf, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("podman", "info", "--format", "{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}")
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "crun "+crun) {
		t.Fatalf("podman with %s: OCI runtime %q (%v), want crun %s", conf, out, err, crun)
	}
	return conf
}

// TestCrunDefault: where podman's default OCI runtime is crun (Debian's
// podman with crun installed), the first call of every bridge process
// works, on hybrid cgroups too (crun refuses them: "cgroups in hybrid mode
// not supported"; the bridge decides on runc before its first container),
// and so do doctor's throwaway container and the bench's containers, which
// go through the same choice.
func TestCrunDefault(t *testing.T) {
	requirePodman(t)
	if testRuntime() != "podman" {
		t.Fatal("needs podman (BRIDGE_TEST_RUNTIME=podman)")
	}
	extra := map[string]string{"CONTAINERS_CONF": crunConf(t), "MCP_BRIDGE_OCI_RUNTIME": ""}
	for i := range 2 {
		out, errOut, code := runCLI(t, extra, "", "exec", "print(1)")
		if code != 0 || out != "1\n" {
			t.Errorf("bridge exec #%d (a fresh process): exit %d, output %q\n%s", i+1, code, out, tail(errOut, 2000))
		}
	}
	b := startBridge(t, extra)
	b.expectText("print(2)", "2", false)

	out, errOut, code := runCLI(t, extra, "", "doctor")
	if !strings.Contains(out, "\nOK   image: ") || code != 0 && !strings.Contains(out, "FAIL config") {
		t.Errorf("doctor: exit %d, want the image check OK:\n%s%s", code, out, tail(errOut, 2000))
	}

	start := time.Now()
	cmd := exec.Command(bridgeBin, "bench", "--groups", "latency", "--samples", "2", "--out", t.TempDir())
	cmd.Env = baseEnv(t, map[string]string{"CONTAINERS_CONF": extra["CONTAINERS_CONF"], "MCP_BRIDGE_LOG_LEVEL": "warn"})
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if stdout, err := cmd.Output(); err != nil {
		t.Errorf("bridge bench --groups latency: %v\n%s\n%s", err, stdout, tail(stderr.String(), 3000))
	}
	t.Logf("bench took %v", time.Since(start).Round(time.Second))
}
