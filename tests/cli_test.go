package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runCLI runs the bridge binary with args and env, returning stdout,
// stderr and the exit code.
func runCLI(t *testing.T, extra map[string]string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runCLIIn(t, "", extra, stdin, args...)
}

// runCLIIn is runCLI in working directory dir ("" inherits the test's).
func runCLIIn(t *testing.T, dir string, extra map[string]string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bridgeBin, args...)
	cmd.Dir = dir
	cmd.Env = baseEnv(t, extra)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// TestExecCommand checks `bridge exec` output and exit codes (SPEC §13).
func TestExecCommand(t *testing.T) {
	requirePodman(t)
	cases := []struct {
		args     []string
		stdin    string
		wantOut  string
		wantCode int
	}{
		{[]string{"exec", "print(1+1)"}, "", "2\n", 0},
		{[]string{"exec", "-"}, "print('from stdin')", "from stdin\n", 0},
		{[]string{"exec", "1/0"}, "", "", 1},
		{[]string{"exec", " "}, "", "status: validation_error\nMissing 'code' argument\nerror: Missing 'code' argument\n", 2},
		// 4 s, not 1: the timeout covers the session's first-call setup too
		// (saved tools are fetched from the host), which a loaded CI machine
		// can stretch past a second; the interrupt then reports that instead.
		{[]string{"exec", "--timeout", "4", "import time; time.sleep(30)"}, "", "status: timeout\nerror: " + timeoutKept(4, 120) + "\n", 124},
		{[]string{"exec", "--output", "json", "print(1)"}, "", "", 0},
		{[]string{"exec", "--output", "yaml", "print(1)"}, "", "", 2},
		{[]string{"exec"}, "", "", 2},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, nil, c.stdin, c.args...)
		if code != c.wantCode || (c.wantOut != "" && out != c.wantOut) {
			t.Errorf("bridge %q: exit %d, stdout %q; want exit %d, stdout %q\nstderr: %s", c.args, code, out, c.wantCode, c.wantOut, tail(errOut, 2000))
		}
	}
}

// TestBadInvocation checks CLI-1: a bad command, flag or env value prints
// one line to stderr, nothing to stdout, and exits 2.
func TestBadInvocation(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"foo"}, `bridge: unknown command "foo" (commands: run, serve, exec, doctor, auth, audit, replay, image, bench, kubernetes, version, help; bridge help)`},
		{map[string]string{"MCP_BRIDGE_TIMEOUT": "abc"}, []string{"run"}, `bridge: invalid MCP_BRIDGE_TIMEOUT="abc": want an integer from 1 to 120`},
		{map[string]string{"MCP_BRIDGE_MEMORY": "lots"}, []string{"run"}, `bridge: invalid MCP_BRIDGE_MEMORY="lots": want`},
		{map[string]string{"MCP_BRIDGE_OUTPUT_MODE": "tooon"}, []string{"exec", "print(1)"}, `bridge: invalid MCP_BRIDGE_OUTPUT_MODE="tooon": want compact, toon or json`},
		{nil, []string{"run", "--nope"}, "bridge: run: unknown flag --nope; flags: --watch (bridge run --help)"},
		{nil, []string{"replay"}, "bridge: replay: want a record ID (bridge audit show lists them), or both --since and --tool"},
		{nil, []string{"replay", "a", "b"}, "bridge: replay: one record ID at a time, or --since and --tool for many"},
		{nil, []string{"replay", "--since", "soon", "--tool", "x"}, `bridge: replay: invalid value "soon" for --since: want a time`},
		{nil, []string{"replay", "--timeout", "-1", "abc"}, "bridge: replay: invalid value -1 for --timeout: want seconds, at least 1"},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, c.env, "", c.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("bridge %q with %v: exit %d, stdout %q, stderr %q; want exit 2, one line starting %q", c.args, c.env, code, out, errOut, c.want)
		}
	}
	out, _, code := runCLI(t, nil, "", "version")
	if code != 0 || !strings.HasPrefix(out, "bridge ") || !strings.Contains(out, ", go1.") {
		t.Errorf("bridge version: exit %d, %q", code, out)
	}
}

// TestMissingImage checks CTR-5's actionable message; the bridge stays up.
func TestMissingImage(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_IMAGE": "localhost/bridge-no-such-image:latest"})
	want := "Sandbox image 'localhost/bridge-no-such-image:latest' is not available. Build it with `bridge image build`, or set MCP_BRIDGE_IMAGE to a local image with python3 3.11+."
	for i := 0; i < 2; i++ {
		sc := structured(t, b.run("print(1)"))
		if got, _ := sc["error"].(string); testRuntime() == "kubernetes" {
			// A node pulls the image: the note names the node and the pull error.
			if kw := "Sandbox image 'localhost/bridge-no-such-image:latest' is not available on node "; !strings.HasPrefix(got, kw) || strings.Contains(got, "\n") {
				t.Fatalf("call %d: error %q, want one line starting %q", i, got, kw)
			}
			continue
		}
		if sc["error"] != want {
			t.Fatalf("call %d: error %v, want %q", i, sc["error"], want)
		}
	}
}

// TestContainersDieWithBridge checks CLN-2/CLN-3: after a SIGKILL of the
// bridge mid-call, its containers are gone within 10 s, even with a worker
// spinning in Python or holding the GIL in C code.
func TestContainersDieWithBridge(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	cmd := exec.Command(bridgeBin, "run")
	cmd.Env = baseEnv(t, nil)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		stdin.Write(append(b, '\n'))
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	r := bufio.NewReader(stdout)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	for i, code := range []string{"while True: pass", "import re\nre.match(r'(a+)+$', 'a'*40 + 'b')"} {
		send(map[string]any{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": map[string]any{
			"name": "run_python", "arguments": map[string]any{"code": code, "session": "s" + strconv.Itoa(i), "timeout": 100}}})
	}
	prefix := "bridge-" + strconv.Itoa(cmd.Process.Pid) + "-s"
	deadline := time.Now().Add(30 * time.Second)
	for countContainers(prefix) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the two session containers never started")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // let both cells start
	killed := time.Now()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for countContainers("bridge-"+strconv.Itoa(cmd.Process.Pid)+"-") > 0 {
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("containers still running 10 s after SIGKILL of the bridge")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("containers gone %v after SIGKILL", time.Since(killed).Round(10*time.Millisecond))
}

func countContainers(prefix string) int { return len(containerNames(prefix)) }

// TestCLITable checks every command's help, a typo, a stray argument and a
// bad value against the binary: the exit code, stdout only for help, and
// one stderr line that names the fix.
func TestCLITable(t *testing.T) {
	cases := []struct {
		args     []string
		wantCode int
		wantOut  string // prefix of stdout ("" means empty)
		wantErr  string // substring of the one stderr line ("" means empty stderr)
	}{
		{[]string{"--help"}, 0, "bridge ", ""},
		{[]string{"help"}, 0, "bridge ", ""},
		{[]string{"run", "--help"}, 0, "usage: bridge run [--watch]", ""},
		{[]string{"exec", "-h"}, 0, "usage: bridge exec [flags] (CODE | -)", ""},
		{[]string{"help", "doctor"}, 0, "usage: bridge doctor [--json] [--server NAME]", ""},
		{[]string{"image", "--help"}, 0, "usage: bridge image build [flags]", ""},
		{[]string{"image", "build", "-h"}, 0, "usage: bridge image build [flags]", ""},
		{[]string{"bench", "--help"}, 0, "usage: bridge bench [flags]", ""},
		{[]string{"version", "--help"}, 0, "usage: bridge version", ""},
		{[]string{"help", "help"}, 0, "usage: bridge help [COMMAND]", ""},
		// Typos get the nearest name.
		{[]string{"exce", "print(1)"}, 2, "", `unknown command "exce"; did you mean "exec"?`},
		{[]string{"doctr"}, 2, "", `did you mean "doctor"?`},
		{[]string{"help", "benhc"}, 2, "", `did you mean "bench"?`},
		{[]string{"image", "biuld"}, 2, "", `did you mean "build"?`},
		{[]string{"exec", "--servres", "x", "1"}, 2, "", "unknown flag --servres; did you mean --servers?"},
		{[]string{"doctor", "--sever", "x"}, 2, "", "unknown flag --sever; did you mean --server?"},
		{[]string{"bench", "--sample", "3"}, 2, "", "did you mean --samples?"},
		{[]string{"run", "--wacth"}, 2, "", "did you mean --watch?"},
		// Stray arguments.
		{[]string{"doctor", "foo"}, 2, "", "doctor takes no arguments; to check one server: bridge doctor --server foo"},
		{[]string{"run", "foo"}, 2, "", "run takes no arguments (bridge run --help)"},
		{[]string{"bench", "foo"}, 2, "", "bench takes no arguments (bridge bench --help)"},
		{[]string{"version", "foo"}, 2, "", "version takes no arguments"},
		{[]string{"image", "build", "foo"}, 2, "", "image build takes no arguments"},
		{[]string{"exec", "print(1)", "print(2)"}, 2, "", "quote the code as one argument"},
		{[]string{"exec"}, 2, "", "or - to read code from stdin: bridge exec 'print(1)'"},
		// Bad values.
		{[]string{"bench", "--samples", "-5"}, 2, "", "invalid --samples -5: want an integer >= 1"},
		{[]string{"bench", "--samples", "x"}, 2, "", `invalid value "x" for --samples: want an integer`},
		{[]string{"exec", "--timeout", "x", "1"}, 2, "", `invalid value "x" for --timeout: want an integer`},
		{[]string{"exec", "1", "--timeout", "-1"}, 2, "", "invalid --timeout -1: want a number of seconds >= 1"},
		{[]string{"exec", "--output", "yaml", "1"}, 2, "", `invalid --output "yaml": want compact, toon or json`},
		{[]string{"exec", "1", "--timeout"}, 2, "", "--timeout needs a value"},
		{[]string{"image", "build", "--method", "zip"}, 2, "", `invalid --method "zip": want auto, containerfile or debian`},
		// Code that starts with '-' needs --.
		{[]string{"exec", "-1"}, 2, "", "code that starts with '-' goes after --: bridge exec -- CODE"},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, nil, "", c.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		okErr := (c.wantErr == "" && errOut == "") ||
			(c.wantErr != "" && len(lines) == 1 && strings.HasPrefix(lines[0], "bridge: ") && strings.Contains(lines[0], c.wantErr))
		okOut := (c.wantOut == "" && out == "") || (c.wantOut != "" && strings.HasPrefix(out, c.wantOut))
		if code != c.wantCode || !okErr || !okOut {
			t.Errorf("bridge %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr one line with %q",
				c.args, code, tail(out, 300), errOut, c.wantCode, c.wantOut, c.wantErr)
		}
	}
}

// TestExecOutputPipes checks that exec --output json prints exactly one JSON
// document and toon bare TOON, and that flags after the code and code after
// -- work.
func TestExecOutputPipes(t *testing.T) {
	requirePodman(t)
	out, errOut, code := runCLI(t, nil, "", "exec", "print(6 * 7)", "--output", "json", "--timeout", "20")
	dec := json.NewDecoder(strings.NewReader(out))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || code != 0 {
		t.Fatalf("exec --output json: exit %d, stdout %q is not JSON: %v\nstderr: %s", code, out, err, tail(errOut, 2000))
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Errorf("exec --output json printed more than one JSON document: %q", out)
	}
	if doc["status"] != "success" || fmt.Sprint(doc["stdout"]) != "[42]" {
		t.Errorf("exec --output json: %v", doc)
	}
	out, _, code = runCLI(t, nil, "", "exec", "--output", "toon", "print(1)")
	if code != 0 || !strings.HasPrefix(out, "status: success\n") || strings.Contains(out, "```") {
		t.Errorf("exec --output toon: exit %d, %q; want bare TOON", code, out)
	}
	out, _, code = runCLI(t, nil, "", "exec", "--", "-1 + 3")
	if code != 0 || out != "2\n" {
		t.Errorf("exec -- '-1 + 3': exit %d, %q; want 2", code, out)
	}
}

// TestOOMLeavesCwdClean checks that an out-of-memory kill in a session
// writes nothing into the directory the bridge was started in (podman's
// conmon writes an oom file into the runtime CLI's working directory).
func TestOOMLeavesCwdClean(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	cwd := t.TempDir()
	out, errOut, code := runCLIIn(t, cwd, map[string]string{"MCP_BRIDGE_MEMORY": "64m"}, "", "exec", "x = bytearray(400 << 20)")
	if code != 1 || !strings.Contains(out, "memory limit exceeded") {
		t.Fatalf("memory bomb: exit %d, stdout %q; want exit 1, memory limit exceeded\nstderr: %s", code, out, tail(errOut, 2000))
	}
	entries, err := os.ReadDir(cwd)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("the bridge left %s in its working directory", e.Name())
	}
}

// TestExecSpillOnHost checks that a truncated exec names a file on the host
// that holds the full output, not one inside the removed container.
func TestExecSpillOnHost(t *testing.T) {
	requirePodman(t)
	state := t.TempDir()
	out, errOut, code := runCLI(t, map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "4096", "MCP_BRIDGE_STATE_DIR": state}, "",
		"exec", "for i in range(20000):\n    print(f'line {i}')")
	m := regexp.MustCompile(`full output in (\S+) \.\.\.\]`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("exec: exit %d, no marker in %q\nstderr: %s", code, tail(out, 500), tail(errOut, 2000))
	}
	if !strings.HasPrefix(m[1], filepath.Join(state, ".bridge", "output")+"/") {
		t.Fatalf("marker names %s, want a file under %s/.bridge/output", m[1], state)
	}
	data, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 20000 || lines[12345] != "line 12345" {
		t.Errorf("host copy has %d lines (line 12345: %q), want 20000", len(lines), lines[min(12345, len(lines)-1)])
	}
}

// TestSkippedConfigIsNamed checks that a broken config file appears where a
// user or model looks: the unknown-server error, discovered_servers
// (detailed) and doctor (a FAIL, exit 1); and that doctor suggests the
// nearest server name.
func TestSkippedConfigIsNamed(t *testing.T) {
	requirePodman(t)
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "good.json"), map[string]any{"mcpServers": map[string]any{"everything": map[string]any{"command": fakeBin}}})
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"mcpServers": {"notes": {"command": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MCP_BRIDGE_CONFIG_DIR": dir}
	out, _, code := runCLI(t, env, "", "exec", "--servers", "notes", "print(1)")
	for _, want := range []string{"Unknown MCP server: notes", "Known servers: everything.", "Skipped config: " + filepath.Join(dir, "broken.json") + ": invalid JSON"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("exec --servers notes: exit %d, %q; want exit 1 and %q", code, out, want)
		}
	}
	out, errOut, code := runCLI(t, env, "", "exec", "for s in runtime.discovered_servers(detailed=True): print(sorted(s.items()))")
	if code != 0 || !strings.Contains(out, "('file', '"+filepath.Join(dir, "broken.json")+"'), ('skipped', 'invalid JSON") {
		t.Errorf("discovered_servers(detailed=True): exit %d, %q; want the skipped file\nstderr: %s", code, out, tail(errOut, 1000))
	}
	out, _, code = runCLI(t, env, "", "doctor", "--server", "evrything")
	if code != 1 || !strings.Contains(out, "FAIL config "+filepath.Join(dir, "broken.json")+": mcps: 0 servers; skipped: invalid JSON") ||
		!strings.Contains(out, `FAIL server evrything: not found in the configuration; did you mean "everything"?`) {
		t.Errorf("doctor: exit %d, output:\n%s\nwant exit 1, a FAIL for broken.json and a suggestion", code, out)
	}
}

// TestConcurrentBridgesKeepContainers runs bridges that cannot see each
// other's processes (separate pid namespaces, as bridges in different
// containers or on a Mac, where there is no /proc, cannot) and different
// state dirs; each sweep at start must leave the others' containers alone.
// Old labels (host/pid/start) are judged by /proc and fail this.
func TestConcurrentBridgesKeepContainers(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	if os.Getuid() != 0 {
		t.Fatal("needs root for unshare --pid (CI runs the suite as root)")
	}
	// sh stays the namespace's pid 1, so the bridge exits (and cleans up)
	// before the kernel tears the namespace down.
	ns := []string{"unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", `"$0" run; :`, bridgeBin}
	// The owner label carries the lock path, under each bridge's HOME.
	hx, hy, hz := t.TempDir(), t.TempDir(), t.TempDir()
	t.Cleanup(func() {
		// A namespace's teardown can strand a container its bridge was
		// still creating; remove them until none is left.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			left := append(containersOwnedUnder(hx), containersOwnedUnder(hz)...)
			if len(left) == 0 {
				return
			}
			_ = exec.Command("podman", append([]string{"rm", "-f", "-t", "0"}, left...)...).Run()
		}
	})
	x := startBridgeArgv(t, map[string]string{"HOME": hx}, ns[0], ns[1:], "bridge-e2e")
	x.expectText("v = 'x'\nprint(v)", "x", false)
	xs := containersOwnedUnder(hx)
	if len(xs) == 0 {
		t.Fatal("the namespaced bridge has no containers")
	}
	y := startBridge(t, map[string]string{"HOME": hy})
	y.expectText("v = 'y'\nprint(v)", "y", false)
	waitSweep(t, y)
	ys := containersOwnedUnder(hy)
	z := startBridgeArgv(t, map[string]string{"HOME": hz}, ns[0], ns[1:], "bridge-e2e")
	waitSweep(t, z)
	left := map[string]bool{}
	for _, n := range containerNames("bridge-") {
		left[n] = true
	}
	for _, n := range append(xs, ys...) {
		if !left[n] {
			t.Errorf("container %s of a living bridge was removed by another bridge's sweep", n)
		}
	}
	for _, b := range []*bridge{x, y} {
		if r := b.run("print(v)"); r.IsError {
			t.Errorf("a session lost its state when another bridge started: %s", text(t, r))
		}
	}
	z.expectText("print(2)", "2", false)
}

// containersOwnedUnder lists the containers whose bridge.owner label
// names a lock file under dir.
func containersOwnedUnder(dir string) []string {
	out, _ := exec.Command("podman", "ps", "-a", "--format", `{{.Names}} {{index .Labels "bridge.owner"}}`).Output()
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if name, owner, ok := strings.Cut(line, " "); ok && strings.Contains(owner, "/lock="+dir+"/") {
			names = append(names, name)
		}
	}
	return names
}

// waitSweep waits until the bridge logged the end of its start-up sweep.
func waitSweep(t *testing.T, b *bridge) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(b.stderr.String(), `"message":"sweep: done"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the bridge never finished its start-up sweep:\n%s", tail(b.stderr.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// containerNames lists the containers whose name starts with prefix.
func containerNames(prefix string) []string {
	out, _ := exec.Command(runtimeCLI(), "ps", "-a", "--format", "{{.Names}}").Output()
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	return names
}

// TestExecNotesToStderr: in compact output, bridge exec's notes go to
// stderr, so stdout holds what the code printed (x=$(bridge exec ...) is
// that); --output json keeps them inside its one document (issue 35).
func TestExecNotesToStderr(t *testing.T) {
	requirePodman(t)
	out, errOut, code := runCLI(t, nil, "", "exec", "--timeout", "100000", "print(2+2)")
	if code != 0 || out != "4\n" || !strings.Contains(errOut, "note: timeout clamped to ") {
		t.Errorf("compact: exit %d, stdout %q, stderr %q; want 0, \"4\\n\" and the clamp note on stderr", code, out, tail(errOut, 1000))
	}
	out, _, code = runCLI(t, nil, "", "exec", "--output", "json", "--timeout", "100000", "print(2+2)")
	if code != 0 || !strings.Contains(out, "timeout clamped to ") {
		t.Errorf("json: exit %d, stdout %q; want the clamp note inside the document", code, out)
	}
}
