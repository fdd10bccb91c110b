package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// testRuntime is the runtime under test, from BRIDGE_TEST_RUNTIME: "podman"
// (the default), "docker", "kubernetes" (pods on the cluster KUBECONFIG
// names; go tool task test:k8s starts one), or "local" (no container, a fast
// inner loop only).
func testRuntime() string {
	switch r := os.Getenv("BRIDGE_TEST_RUNTIME"); r {
	case "local", "docker", "kubernetes":
		return r
	}
	return "podman"
}

// runtimeCLI is the container CLI the tests inspect containers with.
func runtimeCLI() string {
	if testRuntime() == "docker" {
		return "docker"
	}
	return "podman"
}

var runtimeCheck struct {
	once sync.Once
	err  error
}

// requirePodman fails (never skips) when the container runtime under test
// (podman, or docker with BRIDGE_TEST_RUNTIME=docker) is missing or its
// engine does not answer.
func requirePodman(t *testing.T) {
	t.Helper()
	if testRuntime() == "local" {
		return
	}
	if testRuntime() == "kubernetes" {
		requireKube(t)
		return
	}
	runtimeCheck.once.Do(func() {
		if _, err := exec.LookPath(runtimeCLI()); err != nil {
			runtimeCheck.err = err
			return
		}
		if out, err := exec.Command(runtimeCLI(), "version").CombinedOutput(); err != nil {
			runtimeCheck.err = fmt.Errorf("%s version: %v: %s", runtimeCLI(), err, tail(string(out), 400))
		}
	})
	if runtimeCheck.err != nil {
		t.Fatalf("%s is required for the end-to-end suite (CI installs and starts it): %v", runtimeCLI(), runtimeCheck.err)
	}
}

// cgroupLimits reports whether the runtime under test enforces --memory and
// --pids-limit with cgroups; rootless engines on cgroup v1 do not, and the
// bridge falls back to ulimits there (RT-4).
func cgroupLimits(t *testing.T) bool {
	t.Helper()
	if testRuntime() == "kubernetes" {
		return true // the kubelet's cgroups
	}
	format := "{{.Host.Security.Rootless}} {{.Host.CgroupsVersion}}"
	if runtimeCLI() == "docker" {
		format = "{{.SecurityOptions}} {{.CgroupVersion}}"
	}
	out, err := exec.Command(runtimeCLI(), "info", "--format", format).Output()
	if err != nil {
		t.Fatalf("%s info: %v", runtimeCLI(), err)
	}
	s := strings.TrimSpace(string(out))
	rootless := strings.HasPrefix(s, "true") || strings.Contains(s, "name=rootless")
	v1 := strings.HasSuffix(s, "v1") || strings.HasSuffix(s, " 1")
	return !(rootless && v1)
}

// baseEnv is the environment of a bridge under test: an isolated HOME,
// config and state dir, and the test runtime.
func baseEnv(t *testing.T, extra map[string]string) []string {
	home := t.TempDir()
	env := map[string]string{
		"PATH":                  os.Getenv("PATH"),
		"HOME":                  home,
		"MCP_BRIDGE_CONFIG_DIR": home + "/MCPs",
		"MCP_BRIDGE_STATE_DIR":  home + "/state",
		"MCP_BRIDGE_LOG_LEVEL":  "debug",
	}
	for k, v := range runtimeHomeEnv() {
		env[k] = v
	}
	if img := os.Getenv("MCP_BRIDGE_IMAGE"); img != "" {
		env["MCP_BRIDGE_IMAGE"] = img // the image under test (go tool task passes IMAGE)
	}
	switch testRuntime() {
	case "local":
		env["MCP_BRIDGE_RUNTIME"] = "local"
		env["MCP_BRIDGE_UNSAFE_LOCAL"] = "1"
	case "docker":
		env["MCP_BRIDGE_RUNTIME"] = "docker"
	case "kubernetes":
		for k, v := range kubeEnv() {
			env[k] = v
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// runtimeHomeEnv keeps a rootless engine on the user's own storage and
// configuration although the bridge under test gets a temporary HOME:
// rootless podman finds its images under $XDG_DATA_HOME (else
// ~/.local/share) and its storage driver in ~/.config/containers, rootless
// docker its daemon through DOCKER_HOST.
func runtimeHomeEnv() map[string]string {
	env := map[string]string{}
	for _, k := range []string{"XDG_RUNTIME_DIR", "DOCKER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	home, err := os.UserHomeDir()
	if err != nil || os.Geteuid() == 0 {
		return env
	}
	env["XDG_DATA_HOME"] = filepath.Join(home, ".local", "share")
	if v := os.Getenv("XDG_DATA_HOME"); v != "" {
		env["XDG_DATA_HOME"] = v
	}
	for k, f := range map[string]string{
		"CONTAINERS_STORAGE_CONF": filepath.Join(home, ".config", "containers", "storage.conf"),
		"CONTAINERS_CONF":         filepath.Join(home, ".config", "containers", "containers.conf"),
		"DOCKER_CONFIG":           filepath.Join(home, ".docker"),
	} {
		if _, err := os.Stat(f); err == nil && env[k] == "" {
			env[k] = f
		}
	}
	return env
}

// syncBuffer collects the bridge's stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bridge is a running bridge process with an initialized MCP client.
type bridge struct {
	t      *testing.T
	c      *client.Client
	cmd    *exec.Cmd
	stderr *syncBuffer
	init   *mcp.InitializeResult
	closed bool
	// cluster is the bridge's pod when it runs in the cluster (kubernetes
	// backend, kube_incluster_test.go); cmd is nil then.
	cluster *clusterBridge
}

// startBridge starts `bridge run` with extra env and completes the handshake.
func startBridge(t *testing.T, extra map[string]string) *bridge {
	t.Helper()
	return startBridgeWith(t, extra, []string{"run"})
}

// startBridgeWith starts the bridge with args and completes the handshake.
func startBridgeWith(t *testing.T, extra map[string]string, args []string) *bridge {
	t.Helper()
	return startBridgeAs(t, extra, args, "bridge-e2e")
}

// startBridgeAs is startBridgeWith for a client that sends clientName in
// clientInfo at initialize.
func startBridgeAs(t *testing.T, extra map[string]string, args []string, clientName string) *bridge {
	t.Helper()
	return startBridgeArgv(t, extra, bridgeBin, args, clientName)
}

// startBridgeArgv starts command with args (the bridge, or a wrapper that
// runs it) as client clientName and completes the handshake.
func startBridgeArgv(t *testing.T, extra map[string]string, command string, args []string, clientName string) *bridge {
	t.Helper()
	return startBridgeDir(t, "", extra, command, args, clientName)
}

// startBridgeIn starts `bridge args...` in working directory dir, as an MCP
// client starts it in the user's project.
func startBridgeIn(t *testing.T, dir string, extra map[string]string, args ...string) *bridge {
	t.Helper()
	return startBridgeDir(t, dir, extra, bridgeBin, args, "bridge-e2e")
}

// startBridgeDir is startBridgeArgv in working directory dir ("" inherits
// the test's); opts configure the MCP client (its capabilities and handlers).
func startBridgeDir(t *testing.T, dir string, extra map[string]string, command string, args []string, clientName string, opts ...client.ClientOption) *bridge {
	t.Helper()
	return startBridgeVersion(t, dir, extra, command, args, clientName, "2025-11-25", opts...)
}

// startBridgeVersion is startBridgeDir for a client that asks for protocol
// version (2026-07-28: it negotiates with server/discover, no initialize).
func startBridgeVersion(t *testing.T, dir string, extra map[string]string, command string, args []string, clientName, version string, opts ...client.ClientOption) *bridge {
	t.Helper()
	b := &bridge{t: t, stderr: &syncBuffer{}}
	env := baseEnv(t, extra)
	if inCluster(t, command, args, dir) {
		startInCluster(t, b, env, args, clientName, version, opts...)
		return b
	}
	tr := transport.NewStdioWithOptions(command, nil, args,
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = env
			cmd.Dir = dir
			b.cmd = cmd
			return cmd, nil
		}))
	if err := tr.Start(context.Background()); err != nil {
		t.Fatalf("start bridge: %v", err)
	}
	go func() { _, _ = copyAll(b.stderr, tr.Stderr()) }()
	b.c = client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(opts) > 0 { // the client's handlers answer the bridge's requests
		if err := b.c.Start(ctx); err != nil {
			t.Fatalf("start client: %v", err)
		}
	}
	if err := b.initialize(ctx, clientName, version); err != nil {
		b.Close()
		t.Fatalf("initialize: %v\nstderr:\n%s", err, b.stderr.String())
	}
	t.Cleanup(b.Close)
	return b
}

// initialize completes b's handshake as client clientName asking for
// protocol version.
func (b *bridge) initialize(ctx context.Context, clientName, version string) error {
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: clientName, Version: "1"}
	init, err := b.c.Initialize(ctx, req)
	b.init = init
	return err
}

func copyAll(dst *syncBuffer, src interface{ Read([]byte) (int, error) }) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			dst.Write(buf[:k])
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}

// Close ends stdin and waits for the bridge to exit; the test fails if any
// of its containers outlive it (LIF-1).
func (b *bridge) Close() {
	if b.closed {
		return
	}
	b.closed = true
	if b.c != nil {
		_ = b.c.Close()
	}
	if b.cluster != nil {
		b.cluster.close(b.t)
		if b.cluster.pid != 0 {
			assertNoContainers(b.t, b.cluster.pid)
		}
	} else if b.cmd != nil && b.cmd.Process != nil && testRuntime() != "local" {
		if ps := b.cmd.ProcessState; ps != nil {
			if st, ok := ps.Sys().(syscall.WaitStatus); ok && st.Signaled() && st.Signal() == syscall.SIGKILL {
				killed.Store(b.cmd.Process.Pid, true)
			}
		}
		assertNoContainers(b.t, b.cmd.Process.Pid)
	}
	if b.t.Failed() {
		b.t.Logf("bridge stderr:\n%s", tail(b.stderr.String(), 6000))
	}
}

// assertNoContainers checks that no container of the bridge with pid is left.
func assertNoContainers(t *testing.T, pid int) {
	t.Helper()
	if testRuntime() == "kubernetes" {
		assertNoPods(t, pid)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := exec.Command(runtimeCLI(), "ps", "-a", "--format", "{{.Names}}").Output()
		var left []string
		for _, n := range strings.Fields(string(out)) {
			if strings.HasPrefix(n, "bridge-"+strconv.Itoa(pid)+"-") {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("containers left after the bridge exited: %v", left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// call invokes run_python with args and returns the result.
func (b *bridge) call(args map[string]any) *mcp.CallToolResult {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	res, err := b.c.CallTool(ctx, req)
	if err != nil {
		b.t.Fatalf("tools/call: %v\nstderr:\n%s", err, tail(b.stderr.String(), 4000))
	}
	return res
}

// run runs code in the default session and returns the result.
func (b *bridge) run(code string) *mcp.CallToolResult {
	b.t.Helper()
	return b.call(map[string]any{"code": code})
}

// text is content[0].text of a result.
func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) == 0 {
		t.Fatalf("result has no content")
	}
	tc, ok := r.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T, want text", r.Content[0])
	}
	return limitsNote.ReplaceAllString(tc.Text, "")
}

// limitsNote matches the one-line warning the first result of each session
// carries where cgroups cannot enforce limits (RT-4). text drops it, so
// exact-text checks hold on every runtime; TestLimitsWarning checks it.
var limitsNote = regexp.MustCompile(`\nnote: [a-z]+ [a-z]+ on cgroup v1 cannot enforce --memory, --pids-limit or --cpus; [^\n]*`)

// structured decodes structuredContent into a map.
func structured(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	raw, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatalf("structuredContent: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", raw, err)
	}
	return m
}

// expectText runs code and checks the exact text and isError.
func (b *bridge) expectText(code, want string, wantErr bool) *mcp.CallToolResult {
	b.t.Helper()
	r := b.run(code)
	if got := text(b.t, r); got != want || r.IsError != wantErr {
		b.t.Fatalf("run %q:\n got (isError=%v): %q\nwant (isError=%v): %q", code, r.IsError, got, wantErr, want)
	}
	return r
}
