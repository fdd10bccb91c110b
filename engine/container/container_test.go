package container

// container_test.go is over 500 lines on purpose: the argv golden files and
// the per-flag invariants tables are long, and they belong together.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/entrypoint"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const goldenBootstrap = "<bootstrap>"

// baseSpec is a podman spec with fixed values, so golden files are stable.
func baseSpec() ArgvSpec {
	return ArgvSpec{
		CLI:       "/usr/bin/podman",
		Podman:    true,
		Name:      "bridge-4242-default-a1b2c3",
		Owner:     "host.example/4242/1700000000000",
		Session:   "default",
		Image:     DefaultImage,
		User:      "65534:65534",
		Memory:    "512m",
		Pids:      128,
		Nofile:    1024,
		Nproc:     1024,
		Bootstrap: goldenBootstrap,
		Seccomp:   "/home/u/MCPs/.bridge/seccomp-0123456789ab.json",
		IDMap:     &IDMap{UID: 2147483647, GID: 2147549183},
	}
}

func dockerSpec() ArgvSpec {
	s := baseSpec()
	s.CLI = "/usr/bin/docker"
	s.Podman = false
	s.IDMap = nil
	return s
}

// argvCases are the golden cases of SPEC §6.2: podman, podman with an OCI
// runtime (runsc by name and by path, crun), docker (with and without an OCI
// runtime), each with and without --cpus and --ulimit data.
var argvCases = []struct {
	name string
	spec func() ArgvSpec
}{
	{"podman", baseSpec},
	{"podman-cpus-data", func() ArgvSpec {
		s := baseSpec()
		s.CPUs, s.DataBytes = "1.5", 512<<20
		return s
	}},
	{"podman-runsc", func() ArgvSpec {
		s := baseSpec()
		s.OCIRuntime, s.IDMap = "runsc", nil
		return s
	}},
	{"podman-runsc-path-cpus", func() ArgvSpec {
		s := baseSpec()
		s.OCIRuntime, s.CPUs, s.IDMap = "/usr/local/bin/runsc", "2", nil
		return s
	}},
	// Rootless podman with MCP_BRIDGE_SECCOMP=runtime: neither flag.
	{"podman-rootless-runtime-seccomp", func() ArgvSpec {
		s := baseSpec()
		s.Seccomp, s.IDMap = "", nil
		return s
	}},
	{"podman-crun-low-limits", func() ArgvSpec {
		s := baseSpec()
		s.OCIRuntime, s.Nofile, s.Nproc, s.Memory, s.Pids, s.User = "crun", 256, 63, "1g", 64, "1000:1000"
		return s
	}},
	{"docker", dockerSpec},
	{"docker-cpus-data", func() ArgvSpec {
		s := dockerSpec()
		s.CPUs, s.DataBytes = "0.5", 1<<30
		return s
	}},
	{"docker-runsc", func() ArgvSpec {
		s := dockerSpec()
		s.OCIRuntime = "runsc"
		return s
	}},
	// Opt-in host folders (MCP_BRIDGE_MOUNTS), the only cases with mounts.
	{"podman-mounts-rootless", func() ArgvSpec {
		s := baseSpec()
		s.Mounts, s.KeepID, s.IDMap = goldenMounts, true, nil // rootless: no id map
		return s
	}},
	{"podman-mounts-rootful", func() ArgvSpec {
		s := baseSpec()
		s.Mounts = goldenMounts
		return s
	}},
	{"docker-mounts", func() ArgvSpec {
		s := dockerSpec()
		s.Mounts = goldenMounts
		return s
	}},
	{"podman-socket-link", func() ArgvSpec {
		s := baseSpec()
		s.LinkFD = true
		return s
	}},
}

var goldenMounts = []Mount{{Host: "/home/u/data", Container: "/data"}, {Host: "/home/u/out", Container: "/mnt/out", RW: true}}

// TestContainerArgvGolden compares ContainerArgv, one argument per line,
// with testdata/argv/<case>.golden; -update rewrites the files.
func TestContainerArgvGolden(t *testing.T) {
	for _, tc := range argvCases {
		t.Run(tc.name, func(t *testing.T) {
			argv := ContainerArgv(tc.spec())
			for _, a := range argv {
				if strings.Contains(a, "\n") {
					t.Fatalf("argument %q holds a newline; the golden format needs one per line", a)
				}
			}
			got := strings.Join(argv, "\n") + "\n"
			path := filepath.Join("testdata", "argv", tc.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("argv differs from %s\n got:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}

// flagValues returns the argument after each occurrence of flag among the
// container flags (between "run" and the image).
func flagValues(flags []string, flag string) []string {
	var out []string
	for i := 0; i < len(flags)-1; i++ {
		if flags[i] == flag {
			out = append(out, flags[i+1])
		}
	}
	return out
}

// TestContainerArgvInvariants checks the §6.2 and CTR-2 properties of every
// golden case independently of the golden text.
func TestContainerArgvInvariants(t *testing.T) {
	for _, tc := range argvCases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec()
			argv := ContainerArgv(s)
			if argv[0] != s.CLI {
				t.Fatalf("argv[0] = %q, want %q", argv[0], s.CLI)
			}
			// The command ends with: <image> python3 -u -c <bootstrap>, and
			// the link's descriptor when the link is a socket.
			wantTail := []string{s.Image, "python3", "-u", "-c", s.Bootstrap}
			if s.LinkFD {
				wantTail = append(wantTail, "3")
			}
			if got := argv[len(argv)-len(wantTail):]; !slices.Equal(got, wantTail) {
				t.Fatalf("argv ends %q, want %q", got, wantTail)
			}
			run := slices.Index(argv, "run")
			if run < 0 {
				t.Fatalf("no run subcommand in %q", argv)
			}
			global := argv[1:run]
			flags := argv[run+1 : len(argv)-len(wantTail)]
			// The link: stdin and stdout (-i), or fd 3 passed through.
			if got := flagValues(flags, "--preserve-fds"); s.LinkFD != slices.Equal(got, []string{"1"}) || (!s.LinkFD && len(got) > 0) {
				t.Errorf("--preserve-fds values %q with LinkFD %v", got, s.LinkFD)
			}
			if got, want := countOf(flags, "-i"), 1; s.LinkFD == (got == want) {
				t.Errorf("-i appears %d times with LinkFD %v", got, s.LinkFD)
			}

			// No volume, mount or bind of any kind (CTR-2) unless
			// MCP_BRIDGE_MOUNTS asked for them, and then exactly those.
			if len(s.Mounts) > 0 {
				want := MountArgs(s.Mounts, s.Podman, s.KeepID, s.User)
				if i := slices.Index(flags, want[0]); i < 0 || !slices.Equal(flags[i:i+len(want)], want) {
					t.Errorf("flags %q lack the mount flags %q", flags, want)
				}
			}
			for _, a := range argv[:len(argv)-1] {
				if len(s.Mounts) > 0 {
					break
				}
				low := strings.ToLower(a)
				for _, bad := range []string{"-v", "--volume", "--mount", "--bind", "--volumes-from", "--device"} {
					if low == bad || strings.HasPrefix(low, bad+"=") {
						t.Errorf("argv holds %q", a)
					}
				}
				if strings.Contains(low, "bind") || strings.Contains(low, "type=volume") {
					t.Errorf("argv holds %q, which looks like a bind mount", a)
				}
			}
			// Only the four fixed variables, no server metadata (CTR-2).
			if got, want := flagValues(flags, "--env"), []string{"HOME=/workspace", "PYTHONUNBUFFERED=1",
				"PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8"}; !slices.Equal(got, want) {
				t.Errorf("--env values %q, want %q", got, want)
			}
			for _, f := range []string{"--rm", "--init", "--read-only"} {
				if n := countOf(flags, f); n != 1 {
					t.Errorf("%s appears %d times, want once", f, n)
				}
			}
			single := []struct{ flag, want string }{
				{"--pull", "never"},
				{"--network", "none"},
				{"--cap-drop", "ALL"},
				{"--log-driver", "none"},
				{"--user", s.User},
				{"--memory", s.Memory},
				{"--memory-swap", s.Memory},
				{"--pids-limit", strconv.Itoa(s.Pids)},
				{"--name", s.Name},
				{"--workdir", "/workspace"},
			}
			for _, c := range single {
				if got := flagValues(flags, c.flag); !slices.Equal(got, []string{c.want}) {
					t.Errorf("%s values %q, want [%q]", c.flag, got, c.want)
				}
			}
			wantSecOpt := []string{"no-new-privileges"}
			if s.Seccomp != "" {
				wantSecOpt = append(wantSecOpt, "seccomp="+s.Seccomp)
			}
			if got := flagValues(flags, "--security-opt"); !slices.Equal(got, wantSecOpt) {
				t.Errorf("--security-opt values %q, want %q", got, wantSecOpt)
			}
			var wantUID, wantGID []string
			if m := s.IDMap; m != nil {
				wantUID, wantGID = []string{fmt.Sprintf("0:%d:65536", m.UID)}, []string{fmt.Sprintf("0:%d:65536", m.GID)}
			}
			if got := flagValues(flags, "--uidmap"); !slices.Equal(got, wantUID) {
				t.Errorf("--uidmap values %q, want %q", got, wantUID)
			}
			if got := flagValues(flags, "--gidmap"); !slices.Equal(got, wantGID) {
				t.Errorf("--gidmap values %q, want %q", got, wantGID)
			}
			if got := flagValues(flags, "--userns"); s.Mounts == nil && len(got) != 0 {
				t.Errorf("--userns values %q, want none", got)
			}
			if mem, swap := flagValues(flags, "--memory"), flagValues(flags, "--memory-swap"); !slices.Equal(mem, swap) {
				t.Errorf("--memory %q != --memory-swap %q", mem, swap)
			}
			if got, want := flagValues(flags, "--label"), []string{"bridge.owner=" + s.Owner, "bridge.session=" + s.Session}; !slices.Equal(got, want) {
				t.Errorf("--label values %q, want %q", got, want)
			}
			wantUlimit := []string{fmt.Sprintf("nofile=%d:%d", s.Nofile, s.Nofile), fmt.Sprintf("nproc=%d:%d", s.Nproc, s.Nproc)}
			if s.DataBytes > 0 {
				wantUlimit = append(wantUlimit, fmt.Sprintf("data=%d:%d", s.DataBytes, s.DataBytes))
			}
			if got := flagValues(flags, "--ulimit"); !slices.Equal(got, wantUlimit) {
				t.Errorf("--ulimit values %q, want %q", got, wantUlimit)
			}
			if got, want := flagValues(flags, "--tmpfs"), []string{"/tmp:rw,noexec,nosuid,nodev,size=64m",
				"/workspace:rw,noexec,nosuid,nodev,size=128m"}; !slices.Equal(got, want) {
				t.Errorf("--tmpfs values %q, want %q", got, want)
			}
			var wantCPUs []string
			if s.CPUs != "" {
				wantCPUs = []string{s.CPUs}
			}
			if got := flagValues(flags, "--cpus"); !slices.Equal(got, wantCPUs) {
				t.Errorf("--cpus values %q, want %q", got, wantCPUs)
			}
			if got, want := countOf(flags, "--read-only-tmpfs=false"), btoi(s.Podman); got != want {
				t.Errorf("--read-only-tmpfs=false appears %d times, want %d (podman only)", got, want)
			}

			// OCI runtime placement (RT-2).
			var wantGlobal, wantRunRuntime []string
			switch {
			case s.OCIRuntime == "":
			case s.Podman:
				wantGlobal = []string{"--runtime", s.OCIRuntime}
				if filepath.Base(s.OCIRuntime) == "runsc" {
					wantGlobal = append(wantGlobal, "--runtime-flag", "network=none")
				}
			default:
				wantRunRuntime = []string{s.OCIRuntime}
			}
			if !slices.Equal(global, wantGlobal) {
				t.Errorf("global flags before run %q, want %q", global, wantGlobal)
			}
			if got := flagValues(flags, "--runtime"); !slices.Equal(got, wantRunRuntime) {
				t.Errorf("run --runtime values %q, want %q", got, wantRunRuntime)
			}
			if len(wantRunRuntime) > 0 && (flags[0] != "--runtime" || flags[1] != s.OCIRuntime) {
				t.Errorf("docker: --runtime must follow run directly, got %q", flags[:2])
			}
			if slices.Contains(flags, "--runtime-flag") {
				t.Errorf("--runtime-flag after run: %q", flags)
			}
		})
	}
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fakeCLI writes an executable shell script named name into dir and returns
// its absolute path.
func fakeCLI(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// testConfig is the launcher's part of the bridge's defaults (an empty
// environment), with a fresh state dir and owner label h/1/2.
func testConfig(t *testing.T) Config {
	return Config{
		Image: DefaultImage, ContainerUser: "65534:65534", Memory: "512m", MemoryBytes: 512 << 20, Pids: 128,
		StateDir: t.TempDir(), Link: "auto", Owner: "h/1/2",
	}
}

// testLauncher returns a launcher whose CLI is a fake executable named cli
// in a temporary directory.
func testLauncher(t *testing.T, cli string, mod func(*Config)) (*Launcher, string) {
	t.Helper()
	cfg := testConfig(t)
	cfg.Runtime = fakeCLI(t, t.TempDir(), cli)
	cfg.Image = "localhost/x:latest"
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg, zerolog.Nop()), cfg.Runtime
}

// TestStartError checks how the CLI's stderr before the ready frame becomes
// the user-facing error: missing image (CTR-5), rlimit hint and generic
// failures (CTR-6).
func TestStartError(t *testing.T) {
	const missing = "Sandbox image 'localhost/x:latest' is not available. Build it with `bridge image build`, " +
		"or set MCP_BRIDGE_IMAGE to a local image with python3 3.11+."
	tests := []struct {
		name   string
		cli    string
		stderr string
		want   string
	}{
		{"podman image not known", "podman", "Error: localhost/x:latest: image not known\n", missing},
		{"podman image not known after a blank line", "podman", "\nError: localhost/x:latest: image not known\n", missing},
		{"docker unable to find image", "docker",
			"Unable to find image 'localhost/x:latest' locally\ndocker: Error response from daemon: pull access denied.\n", missing},
		{"docker no such image", "docker", "docker: Error response from daemon: No such image: localhost/x:latest.\n", missing},
		{"podman rlimit", "podman",
			"Error: crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied\n",
			"Container runtime 'podman' failed to start the sandbox: Error: crun: setrlimit `RLIMIT_NOFILE`: " +
				"Operation not permitted: OCI permission denied (ulimit values above the host's hard limits?)"},
		{"docker ulimit", "docker",
			"docker: Error response from daemon: failed to create task: invalid ulimit nofile=1048576.\nmore\n",
			"Container runtime 'docker' failed to start the sandbox: docker: Error response from daemon: " +
				"failed to create task: invalid ulimit nofile=1048576. (ulimit values above the host's hard limits?)"},
		{"other error first line", "podman", "  \nError: some failure  \r\nsecond line\n",
			"Container runtime 'podman' failed to start the sandbox: Error: some failure"},
		{"no stderr", "podman", "", "Container runtime 'podman' failed to start the sandbox: (no output)"},
		{"docker unknown runtime", "docker", "docker: Error response from daemon: Unknown runtime specified runsc.\n",
			"Container runtime 'docker' failed to start the sandbox: docker: Error response from daemon: Unknown runtime specified runsc. " +
				"(MCP_BRIDGE_OCI_RUNTIME names a runtime dockerd does not know: register it under \"runtimes\" in /etc/docker/daemon.json, or unset it)"},
		{"hybrid cgroups with an OCI runtime set", "podman",
			"Error: cgroups in hybrid mode not supported, use cgroups v2\n",
			"Container runtime 'podman' failed to start the sandbox: Error: cgroups in hybrid mode not supported, use cgroups v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := testLauncher(t, tt.cli, func(e *Config) { e.OCIRuntime = "crun" })
			err, retry := l.StartError(tt.stderr, 125)
			if retry {
				t.Errorf("retry = true, want false")
			}
			if got := fmt.Sprint(err); got != tt.want {
				t.Errorf("StartError(%q)\n got %s\nwant %s", tt.stderr, got, tt.want)
			}
		})
	}
}

// TestStartErrorHybridCgroups checks RT-3: with no OCI runtime configured
// and runc on PATH, podman's hybrid-cgroup failure asks for one retry and
// switches the launcher to runc; a second failure is reported. Without runc
// on PATH there is no retry.
func TestStartErrorHybridCgroups(t *testing.T) {
	const stderr = "Error: cgroups in hybrid mode not supported, use cgroups v2\n"
	const want = "Container runtime 'podman' failed to start the sandbox: Error: cgroups in hybrid mode not supported, use cgroups v2"

	t.Run("runc on PATH", func(t *testing.T) {
		bin := t.TempDir()
		fakeCLI(t, bin, "runc")
		t.Setenv("PATH", bin)
		l, _ := testLauncher(t, "podman", nil)
		err, retry := l.StartError(stderr, 125)
		if err != nil || !retry {
			t.Fatalf("first failure: got (%v, %v), want (nil, true)", err, retry)
		}
		if got, want := l.GlobalArgs(), []string{"--runtime", "runc"}; !slices.Equal(got, want) {
			t.Errorf("GlobalArgs after the switch = %q, want %q", got, want)
		}
		cmd, err := l.command("s1")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cmd.argv[1:4], []string{"--runtime", "runc", "run"}; !slices.Equal(got, want) {
			t.Errorf("argv after the switch starts %q, want %q", got, want)
		}
		err, retry = l.StartError(stderr, 125)
		if got := fmt.Sprint(err); retry || got != want {
			t.Errorf("second failure: got (%s, %v), want (%s, false)", got, retry, want)
		}
	})
	t.Run("no runc", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		l, _ := testLauncher(t, "podman", nil)
		err, retry := l.StartError(stderr, 125)
		if got := fmt.Sprint(err); retry || got != want {
			t.Errorf("got (%s, %v), want (%s, false)", got, retry, want)
		}
		if got := l.GlobalArgs(); got != nil {
			t.Errorf("GlobalArgs = %q, want none", got)
		}
	})
}

// TestLauncherCommand checks the argv the launcher builds from env: the
// resolved CLI, a unique --name bridge-<pid>-<session>-<6 hex> that is also
// returned as the container name, the owner label, the env's limits, the
// real bootstrap (under 1 KiB, CTR-3) and no --ulimit above 1024 (CTR-1).
func TestLauncherCommand(t *testing.T) {
	l, cli := testLauncher(t, "podman", func(e *Config) {
		e.OCIRuntime = "runsc"
		e.CPUs = "1.5"
		e.Memory = "1g"
		e.Pids = 64
		e.ContainerUser = "1000:1000"
	})
	cmd, err := l.command("work")
	if err != nil {
		t.Fatal(err)
	}
	argv := cmd.argv
	if argv[0] != cli {
		t.Errorf("argv[0] = %q, want %q", argv[0], cli)
	}
	if got, want := argv[1:6], []string{"--runtime", "runsc", "--runtime-flag", "network=none", "run"}; !slices.Equal(got, want) {
		t.Errorf("argv starts %q, want %q", got, want)
	}
	nameRe := regexp.MustCompile(fmt.Sprintf(`^bridge-%d-work-[0-9a-f]{6}$`, os.Getpid()))
	if !nameRe.MatchString(cmd.name) {
		t.Errorf("Name = %q, want a match of %s", cmd.name, nameRe)
	}
	checks := []struct{ flag, want string }{
		{"--name", cmd.name}, {"--memory", "1g"}, {"--memory-swap", "1g"}, {"--pids-limit", "64"},
		{"--cpus", "1.5"}, {"--user", "1000:1000"}, {"--label", "bridge.owner=h/1/2"},
	}
	for _, c := range checks {
		if got := flagValues(argv, c.flag); len(got) == 0 || got[0] != c.want {
			t.Errorf("%s values %q, want %q first", c.flag, got, c.want)
		}
	}
	for _, u := range flagValues(argv, "--ulimit") {
		kind, v, _ := strings.Cut(u, "=")
		soft, hard, _ := strings.Cut(v, ":")
		n, err := strconv.ParseUint(soft, 10, 64)
		if err != nil || soft != hard || n == 0 || n > 1024 || (kind != "nofile" && kind != "nproc") {
			t.Errorf("--ulimit %q, want nofile/nproc n:n with 0 < n <= 1024", u)
		}
	}
	if got, want := argv[len(argv)-5:], []string{"localhost/x:latest", "python3", "-u", "-c", entrypoint.Bootstrap}; !slices.Equal(got, want) {
		t.Errorf("argv ends %q, want %q", got, want)
	}
	if n := len(entrypoint.Bootstrap); n == 0 || n >= 1024 {
		t.Errorf("bootstrap is %d bytes, want 1..1023", n)
	}
	other, err := l.command("work")
	if err != nil {
		t.Fatal(err)
	}
	if other.name == cmd.name {
		t.Errorf("two sandboxes of one session share the name %q", cmd.name)
	}
}

// TestLauncherVerifyArgs checks that VerifyArgs runs from "run" to the image
// with every production flag and no command after the image (IMG-4).
func TestLauncherVerifyArgs(t *testing.T) {
	l, _ := testLauncher(t, "podman", nil)
	got := l.VerifyArgs("localhost/other:1")
	if got[0] != "run" || got[len(got)-1] != "localhost/other:1" {
		t.Fatalf("VerifyArgs = %q, want run ... localhost/other:1", got)
	}
	for _, f := range []string{"--rm", "--init", "--read-only", "--network", "--cap-drop", "--memory-swap", "--log-driver"} {
		if !slices.Contains(got, f) {
			t.Errorf("VerifyArgs lacks %s: %q", f, got)
		}
	}
	if !slices.Contains(got, "-i") || slices.Contains(got, "--preserve-fds") {
		t.Errorf("VerifyArgs = %q, want the stdio link (-i)", got)
	}
	// The socket link's variant (the bench's socket floor) differs only in
	// the link flags, and exists only where sandboxes use that link.
	sock := l.SocketLinkArgs("localhost/other:1")
	if runtime.GOOS != "linux" {
		if sock != nil {
			t.Errorf("SocketLinkArgs on %s = %q, want nil", runtime.GOOS, sock)
		}
		return
	}
	if i := slices.Index(sock, "--preserve-fds"); i < 0 || sock[i+1] != "1" || slices.Contains(sock, "-i") ||
		sock[0] != "run" || sock[len(sock)-1] != "localhost/other:1" {
		t.Errorf("SocketLinkArgs = %q, want run ... --preserve-fds 1 ... localhost/other:1 without -i", sock)
	}
	stdio, _ := testLauncher(t, "podman", func(e *Config) { e.Link = "stdio" })
	if got := stdio.SocketLinkArgs("localhost/other:1"); got != nil {
		t.Errorf("SocketLinkArgs with MCP_BRIDGE_LINK=stdio = %q, want nil", got)
	}
}

// TestFirstLine checks that firstLine returns the first non-blank line that
// is not a runtime warning, trimmed, else the warning, else "(no output)".
func TestFirstLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "(no output)"},
		{"\n\n", "(no output)"},
		{" \t\r\n  \n", "(no output)"},
		{"only", "only"},
		{"first\nsecond", "first"},
		{"\n\n  padded  \nnext\n", "padded"},
		{"crlf\r\nnext\r\n", "crlf"},
		{"\tError: x: image not known\n", "Error: x: image not known"},
		{"Resource limits are not supported and ignored on cgroups V1 rootless systems\nError: runc: fork: resource temporarily unavailable\n",
			"Error: runc: fork: resource temporarily unavailable"},
		{`time="2026-11-23T08:56:57Z" level=warning msg="x"` + "\nError: y\n", "Error: y"},
		{"WARNING: No swap limit support\ndocker: Error response from daemon: z\n", "docker: Error response from daemon: z"},
		{"Resource limits are not supported and ignored on cgroups V1 rootless systems\n", "Resource limits are not supported and ignored on cgroups V1 rootless systems"},
	}
	for _, tt := range tests {
		if got := firstLine(tt.in); got != tt.want {
			t.Errorf("firstLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestVerifyArgsImageNamedLikeAFlagValue checks that VerifyArgs ends at the
// image even when the image name equals a flag value.
func TestVerifyArgsImageNamedLikeAFlagValue(t *testing.T) {
	l, _ := testLauncher(t, "podman", nil)
	for _, img := range []string{"none", "never", "ALL"} {
		got := l.VerifyArgs(img)
		if !slices.Contains(got, "--log-driver") || got[len(got)-1] != img {
			t.Errorf("VerifyArgs(%q) = %q, want every flag through --log-driver none, then %q", img, got, img)
		}
	}
}

// TestVerifyArgsRunscKeepsRuntimeFlag checks that the image check under
// runsc keeps gVisor's network flag (RT-2).
func TestVerifyArgsRunscKeepsRuntimeFlag(t *testing.T) {
	l, _ := testLauncher(t, "podman", func(e *Config) { e.OCIRuntime = "runsc" })
	argv := append(l.GlobalArgs(), l.VerifyArgs("localhost/x:latest")...)
	got := argv[:slices.Index(argv, "run")+1]
	want := []string{"--runtime", "runsc", "--runtime-flag", "network=none", "run"}
	if !slices.Equal(got, want) {
		t.Errorf("image check argv starts %q, want %q", got, want)
	}
}

// TestBridgePidOf checks the parsing of container names for the sweep.
func TestBridgePidOf(t *testing.T) {
	cases := []struct {
		name string
		pid  int
		ok   bool
	}{
		{"bridge-1234-spare-ab12cd", 1234, true},
		{"bridge-99-my.session-0a0b0c", 99, true},
		{"bridge-x-spare-1", 0, false},
		{"other-1-2", 0, false},
		{"bridge-12", 0, false},
	}
	for _, c := range cases {
		pid, ok := bridgePidOf(c.name)
		if pid != c.pid || ok != c.ok {
			t.Errorf("bridgePidOf(%q) = %d, %v; want %d, %v", c.name, pid, ok, c.pid, c.ok)
		}
	}
}

// TestRemoveArgv checks the removal command per runtime: docker rm has no
// -t (a stop timeout), and passing it made every docker removal fail.
func TestRemoveArgv(t *testing.T) {
	for _, tt := range []struct {
		cli  string
		want []string
	}{
		{"podman", []string{"rm", "-f", "-t", "0", "box"}},
		{"docker", []string{"rm", "-f", "box"}},
	} {
		l, cli := testLauncher(t, tt.cli, nil)
		got := l.RemoveArgv("box")
		if len(got) == 0 || got[0] != cli || !slices.Equal(got[len(got)-len(tt.want):], tt.want) || slices.Contains(got, "-t") != (tt.cli == "podman") {
			t.Errorf("%s: RemoveArgv = %q, want %q after the CLI and global flags", tt.cli, got, tt.want)
		}
	}
}

// TestSocketLink checks when sandboxes get the socket link: podman on a
// local Linux engine, unless MCP_BRIDGE_LINK=stdio; never Docker, a remote
// podman or gVisor.
func TestSocketLink(t *testing.T) {
	cases := []struct {
		name   string
		link   string
		cli    string
		podman bool
		oci    string
		env    map[string]string
		want   bool
	}{
		{"podman", "auto", "/usr/bin/podman", true, "", nil, runtime.GOOS == "linux"},
		{"podman with runc", "auto", "podman", true, "runc", nil, runtime.GOOS == "linux"},
		{"stdio asked", "stdio", "/usr/bin/podman", true, "", nil, false},
		{"docker", "auto", "/usr/bin/docker", false, "", nil, false},
		{"gvisor", "auto", "/usr/bin/podman", true, "/usr/local/bin/runsc", nil, false},
		{"podman-remote", "auto", "/usr/bin/podman-remote", true, "", nil, false},
		{"CONTAINER_HOST", "auto", "/usr/bin/podman", true, "", map[string]string{"CONTAINER_HOST": "unix:///run/podman.sock"}, false},
		{"CONTAINER_CONNECTION", "auto", "/usr/bin/podman", true, "", map[string]string{"CONTAINER_CONNECTION": "machine"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CONTAINER_HOST", "")
			t.Setenv("CONTAINER_CONNECTION", "")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if got := SocketLink(Config{Link: c.link}, c.cli, c.podman, c.oci); got != c.want {
				t.Errorf("SocketLink = %v, want %v", got, c.want)
			}
		})
	}
}
