package container

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const (
	dockerDown = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n"
	dockerUp   = `{"ServerVersion":"27.1.0","CgroupVersion":"2","Driver":"overlay2","DefaultRuntime":"runc","Runtimes":{"runc":{}}}`
	podmanUp   = `{"host":{"cgroupVersion":"v1","ociRuntime":{"name":"runc"},"security":{"rootless":false}},` +
		`"store":{"graphDriverName":"overlay"},"version":{"Version":"4.3.1"}}`
)

// cliIn writes an executable name into dir that prints stdout, stderr to
// stderr, and exits with code.
func cliIn(t *testing.T, dir, name, stdout, stderr string, code int) {
	t.Helper()
	src := scriptCLI(t, name, stdout, stderr, code)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestFindRuntimeAnswering: with MCP_BRIDGE_RUNTIME unset, a CLI whose
// engine does not answer is no runtime while another one answers; podman
// is preferred when both answer; one CLI alone is taken without asking.
func TestFindRuntimeAnswering(t *testing.T) {
	type cli struct {
		stdout, stderr string
		code           int
	}
	tests := []struct {
		name           string
		podman, docker *cli
		want           string // base name of the chosen CLI
		wantProbed     string // engine of the facts read while choosing, "" for none
		wantErr        error
		noEndpoint     bool // no sign of a docker daemon; otherwise DOCKER_HOST is set
	}{
		{name: "docker down, podman answers", podman: &cli{stdout: podmanUp}, docker: &cli{stderr: dockerDown, code: 1}, want: "podman"},
		{name: "docker answers, podman does not", podman: &cli{stderr: "Error: cannot connect\n", code: 1}, docker: &cli{stdout: dockerUp},
			want: "docker", wantProbed: "docker"},
		{name: "both answer", podman: &cli{stdout: podmanUp}, docker: &cli{stdout: dockerUp}, want: "podman", wantProbed: "podman"},
		{name: "none answers", podman: &cli{stderr: "Error: x\n", code: 1}, docker: &cli{stderr: dockerDown, code: 1}, want: "podman"},
		{name: "only docker, down", docker: &cli{stderr: dockerDown, code: 1}, want: "docker"},
		{name: "none", wantErr: ErrNoRuntime},
		// No DOCKER_HOST, context or socket: docker is not asked at all,
		// even a stub that would answer (its info would cost every start).
		{name: "docker without a daemon endpoint is not asked", podman: &cli{stdout: podmanUp}, docker: &cli{stdout: dockerUp},
			want: "podman", noEndpoint: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, c := range map[string]*cli{"podman": tt.podman, "docker": tt.docker} {
				if c != nil {
					cliIn(t, dir, name, c.stdout, c.stderr, c.code)
				}
			}
			// cat for the scripts; podman and docker only from dir.
			if cat, err := exec.LookPath("cat"); err != nil {
				t.Fatal(err)
			} else if err := os.Symlink(cat, filepath.Join(dir, "cat")); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir)
			t.Setenv("DOCKER_CONTEXT", "")
			t.Setenv("DOCKER_CONFIG", t.TempDir())
			defer func(s string) { dockerSocket = s }(dockerSocket)
			dockerSocket = filepath.Join(dir, "no-docker.sock")
			if tt.noEndpoint {
				t.Setenv("DOCKER_HOST", "")
			} else {
				t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "docker.sock"))
			}
			got, probed, err := findRuntime(context.Background(), "", "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if filepath.Base(got) != tt.want && !(tt.want == "" && got == "") {
				t.Errorf("chose %q, want %s", got, tt.want)
			}
			gotProbed := ""
			if probed != nil {
				gotProbed = probed.Engine
			}
			if gotProbed != tt.wantProbed {
				t.Errorf("facts read while choosing: %q, want %q", gotProbed, tt.wantProbed)
			}
		})
	}
}

// TestHybridOCI: podman's default crun on hybrid cgroups is replaced by
// runc; nothing else is.
func TestHybridOCI(t *testing.T) {
	bin := t.TempDir()
	fakeCLI(t, bin, "runc")
	crun := RuntimeFacts{Engine: "podman", OCI: "crun"}
	tests := []struct {
		name        string
		f           RuntimeFacts
		chosen      string
		hybrid      bool
		path        string
		want        string
		wantProblem bool
	}{
		{name: "crun, hybrid, runc found", f: crun, hybrid: true, path: bin, want: "runc"},
		{name: "crun as a path", f: RuntimeFacts{Engine: "podman", OCI: "/opt/crun"}, hybrid: true, path: bin, want: "runc"},
		{name: "crun, not hybrid", f: crun, path: bin},
		{name: "runc already", f: RuntimeFacts{Engine: "podman", OCI: "runc"}, hybrid: true, path: bin},
		{name: "the user chose", f: crun, chosen: "crun", hybrid: true, path: bin},
		{name: "docker", f: RuntimeFacts{Engine: "docker", OCI: "crun"}, hybrid: true, path: bin},
		{name: "probe failed", f: RuntimeFacts{Engine: "podman", OCI: "crun", Err: errors.New("x")}, hybrid: true, path: bin},
		{name: "crun, hybrid, no runc", f: crun, hybrid: true, path: t.TempDir(), wantProblem: true},
	}
	dirs := ociDirs
	defer func() { ociDirs = dirs }()
	ociDirs = nil
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			got, problem := hybridOCI(tt.f, tt.chosen, tt.hybrid)
			if got != tt.want || (problem != "") != tt.wantProblem {
				t.Errorf("got (%q, %q), want (%q, problem %v)", got, problem, tt.want, tt.wantProblem)
			}
			if problem != "" && (!strings.Contains(problem, "sudo apt-get install runc") || strings.Contains(problem, "\n")) {
				t.Errorf("problem %q: want one line naming the fix", problem)
			}
		})
	}
}

// TestSettleChoosesRuncBeforeFirstContainer: on hybrid cgroups, where
// podman's default is crun, the first container command already has
// --runtime runc (it waits for the probe), and so do the global flags of
// image builds and the bench and the throwaway check's argv.
func TestSettleChoosesRuncBeforeFirstContainer(t *testing.T) {
	hybrid, crun := hybridCgroups, crunPossible
	defer func() { hybridCgroups, crunPossible = hybrid, crun }()
	hybridCgroups = func() bool { return true }
	crunPossible = func() bool { return true }
	bin := t.TempDir()
	fakeCLI(t, bin, "runc")
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	env := testConfig(t)
	env.Runtime = scriptCLI(t, "podman", strings.Replace(podmanUp, `"name":"runc"`, `"name":"crun"`, 1), "", 0)
	l := New(env, zerolog.Nop())
	cmd, err := l.command("s1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cmd.argv[1:4], []string{"--runtime", "runc", "run"}; !slices.Equal(got, want) {
		t.Errorf("first container argv starts %q, want %q", got, want)
	}
	if got, want := l.GlobalArgs(), []string{"--runtime", "runc"}; !slices.Equal(got, want) {
		t.Errorf("GlobalArgs = %q, want %q", got, want)
	}

	// Not hybrid: no flag, and the first container does not wait for the probe.
	hybridCgroups = func() bool { return false }
	dir := t.TempDir()
	env.Runtime = filepath.Join(dir, "podman")
	if err := os.WriteFile(env.Runtime, []byte("#!/bin/sh\nsleep 2\necho '"+podmanUp+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l = New(env, zerolog.Nop())
	start := time.Now()
	if cmd, err = l.command("s1"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= 2*time.Second || slices.Contains(cmd.argv, "--runtime") {
		t.Errorf("not hybrid: Command took %v, argv %q; want no wait and no --runtime", took, cmd.argv[:4])
	}
}

// TestContainersRangeProblem: rootful podman's doctor warning names the
// line to add when either file lacks a "containers" range of a block.
func TestContainersRangeProblem(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "containers:2147483647:2147483648\n")
	none := write("none", "alice:100000:65536\n")
	small := write("small", "containers:100000:1000\n")
	for _, tt := range []struct {
		uid, gid string
		want     bool
	}{{good, good, false}, {none, good, true}, {good, none, true}, {small, small, true}, {filepath.Join(dir, "missing"), good, true}} {
		got := ContainersRangeProblem(tt.uid, tt.gid)
		if (got != "") != tt.want {
			t.Errorf("%s, %s: %q, want a problem: %v", tt.uid, tt.gid, got, tt.want)
		}
		if got != "" && (!strings.Contains(got, "containers:2147483647:2147483648") || strings.Contains(got, "\n")) {
			t.Errorf("%q: want one line with the fix", got)
		}
	}
}

// TestStartErrorRuntimeDown: the first container start against an engine
// that does not answer names the fix.
func TestStartErrorRuntimeDown(t *testing.T) {
	l, _ := testLauncher(t, "docker", nil)
	err, retry := l.StartError("docker: "+dockerDown+"\nRun 'docker run --help' for more information\n", 125)
	if retry || err == nil || !strings.HasPrefix(err.Error(), "Docker daemon not running: start it, or install podman") || strings.Contains(err.Error(), "\n") {
		t.Errorf("got (%v, %v), want one line that starts with the fix", err, retry)
	}
}

// TestCrunPossible: podman may default to crun when one is where podman
// looks or a containers.conf names it outside a comment; a commented-out
// mention (Debian's default file) does not count.
func TestCrunPossible(t *testing.T) {
	dirs := ociDirs
	defer func() { ociDirs = dirs }()
	ociDirs = nil
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CONTAINERS_CONF_OVERRIDE", "")
	dir := t.TempDir()
	for _, tt := range []struct {
		conf string
		want bool
	}{
		{"[engine]\n#runtime = \"crun\"\n#crun = [\"/usr/bin/crun\"]\n", false},
		{"[engine]\nruntime = \"crun\"\n", true},
		{"[engine.runtimes]\n  crun = [\"/opt/crun\"]\n", true},
	} {
		conf := filepath.Join(dir, "containers.conf")
		if err := os.WriteFile(conf, []byte(tt.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("CONTAINERS_CONF", conf)
		if got := crunPossible(); got != tt.want {
			t.Errorf("containers.conf %q: %v, want %v", tt.conf, got, tt.want)
		}
	}
	bin := t.TempDir()
	fakeCLI(t, bin, "crun")
	t.Setenv("PATH", bin)
	t.Setenv("CONTAINERS_CONF", filepath.Join(dir, "none"))
	if !crunPossible() {
		t.Errorf("crun on PATH: false, want true")
	}
}
