package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestCancellation checks MCP-4: notifications/cancelled interrupts the
// running call like a timeout, so the session is free again at once and
// keeps its state.
func TestCancellation(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.mustOK("kept = 'yes'")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": "import time\ntime.sleep(60)", "timeout": 100}
	if _, err := b.c.CallTool(ctx, req); err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	start := time.Now()
	if got := b.mustOK("kept"); got != "'yes'" {
		t.Errorf("after cancellation: %s", got)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the next call waited %v: the cancelled cell kept running", el)
	}
}

// TestBusySession checks CON-2: calls to one session run one at a time, and
// a call whose timeout runs out while it waits gets the busy error.
func TestBusySession(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	// A warm session: the first call runs at once instead of waiting for a
	// container, which a slow start could make outlast the second call.
	b.mustOK("0")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.call(map[string]any{"code": "import time\ntime.sleep(4)\nprint('first')", "timeout": 20})
	}()
	time.Sleep(500 * time.Millisecond)
	r := b.call(map[string]any{"code": "print('second')", "timeout": 1})
	sc := structured(t, r)
	if sc["status"] != "timeout" || sc["error"] != "Session 'default' was busy with another call for the whole 1s timeout" {
		t.Errorf("busy: %v", sc)
	}
	// A call that can wait runs after the first one.
	if got := text(t, b.call(map[string]any{"code": "print('third')", "timeout": 20})); got != "third" {
		t.Errorf("queued call: %s", got)
	}
	wg.Wait()
}

// TestSessionLimitAndReset checks SES-6 (the least recently used idle
// session is evicted and its next result says so) and SES-4 (reset gives
// fresh state without stateLost).
func TestSessionLimitAndReset(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_SESSIONS": "2", "MCP_BRIDGE_SESSION_DURABILITY": "off"})
	b.call(map[string]any{"code": "v = 'a'", "session": "a"})
	b.call(map[string]any{"code": "v = 'b'", "session": "b"})
	b.call(map[string]any{"code": "v = 'c'", "session": "c"}) // evicts a
	r := b.call(map[string]any{"code": "'v' in globals()", "session": "a"})
	if got := text(t, r); got != "False\nnote: session state was lost (evicted)" {
		t.Errorf("evicted session: %q", got)
	}
	r = b.call(map[string]any{"code": "v", "session": "c"})
	if got := text(t, r); got != "'c'" {
		t.Errorf("session c: %q", got)
	}
	b.mustOK("x = 1\nruntime.reset()")
	r = b.run("'x' in globals()")
	if got := text(t, r); got != "False" || structured(t, r)["stateLost"] != nil {
		t.Errorf("after reset: %q %v", got, structured(t, r))
	}
}

// TestModernEra is MCP-3's smoke test: server/discover lists 2026-07-28 and
// tools/list and tools/call with the modern _meta succeed.
func TestModernEra(t *testing.T) {
	requirePodman(t)
	cmd := exec.Command(bridgeBin, "run")
	cmd.Env = baseEnv(t, nil)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	r := bufio.NewReader(stdout)
	roundTrip := func(v map[string]any) map[string]any {
		data, _ := json.Marshal(v)
		if _, err := stdin.Write(append(data, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return m
	}
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "t", "version": "1"}}
	disc := roundTrip(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": map[string]any{"_meta": meta}})
	if raw, _ := json.Marshal(disc["result"]); !strings.Contains(string(raw), "2026-07-28") {
		t.Fatalf("server/discover: %v", disc)
	}
	list := roundTrip(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": map[string]any{"_meta": meta}})
	if raw, _ := json.Marshal(list["result"]); !strings.Contains(string(raw), `"run_python"`) {
		t.Fatalf("tools/list: %v", list)
	}
	call := roundTrip(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{
		"_meta": meta, "name": "run_python", "arguments": map[string]any{"code": "print(6*7)"}}})
	if raw, _ := json.Marshal(call["result"]); !strings.Contains(string(raw), `"text":"42"`) {
		t.Fatalf("tools/call: %v", call)
	}
}

// TestConcurrentSessionStarts: eight sessions whose containers all start at
// once each answer. podman 4.3's --userns auto deadlocked here (every start
// hung until the start timeout); the bridge's own id blocks do not.
func TestConcurrentSessionStarts(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	const n = 8
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = b.callAsync(map[string]any{"code": fmt.Sprintf("print(%d)", i), "session": fmt.Sprintf("s%d", i), "timeout": 60})
		}()
	}
	wg.Wait()
	for i, g := range got {
		if want := fmt.Sprint(i); g != want {
			t.Errorf("session s%d = %q, want %q", i, g, want)
		}
	}
}
