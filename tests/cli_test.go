package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
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
	cmd := exec.Command(bridgeBin, args...)
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
		{[]string{"exec", "--timeout", "1", "import time; time.sleep(10)"}, "", "status: timeout\nTimeout: execution exceeded 1s\nerror: Execution timed out after 1s\n", 124},
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
		{nil, []string{"foo"}, `bridge: unknown command "foo"; commands: run, exec, doctor, image, bench, version`},
		{map[string]string{"MCP_BRIDGE_TIMEOUT": "abc"}, []string{"run"}, `bridge: invalid MCP_BRIDGE_TIMEOUT="abc": want an integer from 1 to 120`},
		{map[string]string{"MCP_BRIDGE_MEMORY": "lots"}, []string{"run"}, `bridge: invalid MCP_BRIDGE_MEMORY="lots": want`},
		{map[string]string{"MCP_BRIDGE_OUTPUT_MODE": "tooon"}, []string{"exec", "print(1)"}, `bridge: invalid MCP_BRIDGE_OUTPUT_MODE="tooon": want compact, toon or json`},
		{nil, []string{"run", "--nope"}, "bridge: run: flag provided but not defined: -nope"},
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
		if sc := structured(t, b.run("print(1)")); sc["error"] != want {
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

func countContainers(prefix string) int {
	out, _ := exec.Command(runtimeCLI(), "ps", "-a", "--format", "{{.Names}}").Output()
	n := 0
	for _, name := range strings.Fields(string(out)) {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}
