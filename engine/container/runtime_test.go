package container

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// scriptCLI writes an executable named name that prints stdout to stdout,
// stderr to stderr and exits with code.
func scriptCLI(t *testing.T, name, stdout, stderr string, code int) string {
	t.Helper()
	dir := t.TempDir()
	for f, s := range map[string]string{"out": stdout, "err": stderr} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name)
	script := "#!/bin/sh\ncat " + dir + "/out\ncat " + dir + "/err >&2\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

const rootlessV1Warning = `time="2026-11-23T08:56:57Z" level=warning msg="Resource limits are not supported and ignored on cgroups V1 rootless systems"` + "\n"

const podmanRootlessV1 = `{"host":{"cgroupVersion":"v1","ociRuntime":{"name":"runc"},"security":{"rootless":true}},` +
	`"store":{"graphDriverName":"vfs"},"version":{"Version":"4.3.1"}}`

// TestProbeRuntime checks that the probe parses stdout only (a runtime's
// warnings on stderr never become facts) and turns failures into one line
// with the fix.
func TestProbeRuntime(t *testing.T) {
	tests := []struct {
		name, cli, stdout, stderr string
		code                      int
		want                      RuntimeFacts
		wantErr                   string
	}{
		{name: "podman rootless v1 with a warning on stderr", cli: "podman", stdout: podmanRootlessV1, stderr: rootlessV1Warning,
			want: RuntimeFacts{Engine: "podman", Version: "4.3.1", Rootless: true, Cgroup: "1", Driver: "vfs", OCI: "runc"}},
		{name: "docker rootful", cli: "docker",
			stdout: `{"ServerVersion":"20.10.24+dfsg1","SecurityOptions":["name=seccomp,profile=default"],"CgroupVersion":"1",` +
				`"Driver":"overlay2","DefaultRuntime":"runc","Runtimes":{"runc":{},"io.containerd.runc.v2":{}}}`,
			want: RuntimeFacts{Engine: "docker", Version: "20.10.24+dfsg1", Cgroup: "1", Driver: "overlay2", OCI: "runc",
				Runtimes: []string{"io.containerd.runc.v2", "runc"}}},
		{name: "docker rootless", cli: "docker",
			stdout: `{"ServerVersion":"27.1.0","SecurityOptions":["name=seccomp,profile=builtin","name=rootless","name=cgroupns"],"CgroupVersion":"2","Driver":"overlay2","DefaultRuntime":"runc","Runtimes":{"runc":{}}}`,
			want:   RuntimeFacts{Engine: "docker", Version: "27.1.0", Rootless: true, Cgroup: "2", Driver: "overlay2", OCI: "runc", Runtimes: []string{"runc"}}},
		{name: "docker daemon down", cli: "docker", stdout: `{"ServerErrors":["Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"]}`,
			code: 1, wantErr: "Docker daemon not running: start it, or install podman (`sudo systemctl start docker` or Docker Desktop; `sudo apt-get install podman uidmap`): Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"},
		{name: "docker permission denied", cli: "docker",
			stderr: "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock\n", code: 1,
			wantErr: "add your user to the docker group"},
		{name: "podman machine down", cli: "podman", code: 1,
			stderr:  "Cannot connect to Podman. Please verify your connection to the Linux system using `podman system connection list`, or try `podman machine init` and `podman machine start` to manage a new Linux VM\n",
			wantErr: "podman machine not running: Cannot connect to Podman."},
		{name: "podman without subuids", cli: "podman", code: 1, stderr: rootlessV1Warning +
			"Error: cannot set up namespace using \"/usr/bin/newuidmap\": exit status 1\n",
			wantErr: "podman info: Error: cannot set up namespace using \"/usr/bin/newuidmap\": exit status 1; give your user subuid/subgid ranges"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli := scriptCLI(t, tt.cli, tt.stdout, tt.stderr, tt.code)
			got := ProbeRuntime(context.Background(), cli, nil)
			if tt.wantErr != "" {
				if got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr) {
					t.Fatalf("Err = %v, want it to contain %q", got.Err, tt.wantErr)
				}
				if strings.Contains(got.Err.Error(), "level=warning") || strings.Contains(got.Err.Error(), "\n") {
					t.Errorf("Err = %q, want one line without the runtime's warnings", got.Err)
				}
				return
			}
			if got.Err != nil {
				t.Fatalf("Err = %v", got.Err)
			}
			if got.Engine != tt.want.Engine || got.Version != tt.want.Version || got.Rootless != tt.want.Rootless ||
				got.Cgroup != tt.want.Cgroup || got.Driver != tt.want.Driver || got.OCI != tt.want.OCI ||
				!slices.Equal(got.Runtimes, tt.want.Runtimes) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLimitsFallback checks RT-4: on rootless cgroup v1 the sandbox gets
// --ulimit data=<memory bytes> and nproc bounded by the pids limit, and the
// launcher states the warning; with enforcing cgroups neither.
func TestLimitsFallback(t *testing.T) {
	// The probe decides (as for docker on cgroup v1).
	here := localLimitFacts
	localLimitFacts = func(bool) (RuntimeFacts, bool) { return RuntimeFacts{}, false }
	defer func() { localLimitFacts = here }()
	for _, rootless := range []bool{true, false} {
		stdout := podmanRootlessV1
		if !rootless {
			stdout = strings.Replace(stdout, `"rootless":true`, `"rootless":false`, 1)
		}
		env := testConfig(t)
		env.Memory, env.MemoryBytes, env.Pids = "256m", 256<<20, 100
		env.Runtime = scriptCLI(t, "podman", stdout, rootlessV1Warning, 0)
		l := New(env, zerolog.Nop())
		cmd, err := l.command("default")
		if err != nil {
			t.Fatal(err)
		}
		ulimits := flagValues(cmd.argv, "--ulimit")
		hasData := slices.Contains(ulimits, "data=268435456:268435456")
		hasNproc := slices.Contains(ulimits, "nproc=100:100")
		warning := l.LimitsWarning(l.Facts())
		if rootless && (!hasData || !hasNproc || !strings.Contains(warning, "rootless podman on cgroup v1 cannot enforce")) {
			t.Errorf("rootless v1: ulimits %q, warning %q; want data=256m, nproc=100 and a warning", ulimits, warning)
		}
		if !rootless && (hasData || warning != "") {
			t.Errorf("rootful: ulimits %q, warning %q; want no data ulimit and no warning", ulimits, warning)
		}
		verify := l.VerifyArgs("img")
		if got := slices.Contains(flagValues(verify, "--ulimit"), "data=268435456:268435456"); got != rootless {
			t.Errorf("rootless=%v: VerifyArgs has the data ulimit: %v", rootless, got)
		}
	}
}

// TestCommandSkipsProbeWhereFactsAreLocal: where the facts the limits
// depend on are known locally (a local podman, a cgroup v2 host), a
// container command never waits for the runtime probe, which takes 0.5 s
// and more on a cold start; elsewhere it waits for the probe and applies
// its fallbacks.
func TestCommandSkipsProbeWhereFactsAreLocal(t *testing.T) {
	here, hybrid := localLimitFacts, hybridCgroups
	defer func() { localLimitFacts, hybridCgroups = here, hybrid }()
	hybridCgroups = func() bool { return false } // where they are, the OCI runtime waits for the probe (TestSettle)
	for _, holds := range []bool{true, false} {
		localLimitFacts = func(bool) (RuntimeFacts, bool) { return RuntimeFacts{}, holds }
		env := testConfig(t)
		env.Memory, env.MemoryBytes = "256m", 256<<20
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "out"), []byte(podmanRootlessV1), 0o644); err != nil {
			t.Fatal(err)
		}
		env.Runtime = filepath.Join(dir, "podman")
		script := "#!/bin/sh\nsleep 2\ncat " + dir + "/out\n"
		if err := os.WriteFile(env.Runtime, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		l := New(env, zerolog.Nop())
		start := time.Now()
		cmd, err := l.command("default")
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		waited := took >= 2*time.Second
		hasData := slices.Contains(flagValues(cmd.argv, "--ulimit"), "data=268435456:268435456")
		if waited == holds || hasData == holds {
			t.Errorf("facts known here: %v; Command took %v (waited for the probe: %v), data ulimit: %v", holds, took, waited, hasData)
		}
	}
}

// TestLocalLimitFacts: a local podman's facts are its euid's mode and the
// host's cgroup version, what `podman info` reports for it.
func TestLocalLimitFacts(t *testing.T) {
	f, ok := localLimitFacts(true)
	if !ok || f.Rootless != (os.Geteuid() != 0) || (f.Cgroup != "1" && f.Cgroup != "2") {
		t.Errorf("local podman facts: %+v, %v", f, ok)
	}
	t.Setenv("CONTAINER_HOST", "unix:///run/podman/podman.sock")
	if _, ok := localLimitFacts(true); ok {
		t.Errorf("a remote podman's facts are local")
	}
}
