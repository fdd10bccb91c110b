package tests

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// execMemory is the environment of a `bridge exec` with the real memory
// server, its create_* tools gated.
func execMemory(t *testing.T) []string {
	t.Helper()
	env := withServers(t, map[string]any{
		"memory": map[string]any{"command": npmBin(t, "mcp-server-memory"), "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "m.jsonl")}},
	}, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	writeJSON(t, filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy"), map[string]any{
		"servers": map[string]any{"memory": map[string]any{"approve": []string{"create_*"}}},
	})
	return baseEnv(t, env)
}

// TestExecApprovalTerminal: `bridge exec` asks on its terminal (/dev/tty):
// the form's message and field are shown there, and the answer typed
// approves the call.
func TestExecApprovalTerminal(t *testing.T) {
	requirePodman(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	defer ptmx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBin, "exec", "--servers", "memory", create("typed"))
	cmd.Env = execMemory(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, &stderr
	// The pty is the process's controlling terminal: its /dev/tty.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var mu sync.Mutex
	var shown bytes.Buffer
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		answered := false
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			shown.Write(buf[:n])
			prompt := strings.Contains(shown.String(), "Decision (once/run/deny)")
			mu.Unlock()
			if prompt && !answered {
				answered = true
				_, _ = ptmx.Write([]byte("once\n"))
			}
			if err != nil {
				read <- err
				return
			}
		}
	}()
	err = cmd.Wait()
	ptmx.Close()
	if rerr := <-read; rerr != nil && !errors.Is(rerr, syscall.EIO) && !strings.Contains(rerr.Error(), "closed") {
		t.Errorf("read the pty: %v", rerr)
	}
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		t.Fatalf("bridge exec: %v\nterminal:\n%s\nstdout:\n%s\nstderr:\n%s", err, shown.String(), stdout.String(), stderr.String())
	}
	if !strings.Contains(shown.String(), "memory.create_entities") {
		t.Errorf("the terminal did not show the form naming the tool:\n%s", shown.String())
	}
	if got := stdout.String(); !strings.Contains(got, "created") || !strings.Contains(got, "'typed'") {
		t.Errorf("approved on the terminal: %s", got)
	}
}

// TestExecApprovalNoTerminal: without a terminal `bridge exec` cannot ask,
// so the gated call is refused and nothing is created.
func TestExecApprovalNoTerminal(t *testing.T) {
	requirePodman(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBin, "exec", "--servers", "memory", create("untyped"))
	cmd.Env = execMemory(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // a new session: no controlling terminal
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bridge exec: %v\n%s", err, out)
	}
	if got := string(out); !strings.Contains(got, "refused: denied") || !strings.Contains(got, "no terminal") || !strings.Contains(got, "names: []") {
		t.Errorf("without a terminal: %s", got)
	}
}
