package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// callTokenCtx runs run_python with args and _meta.progressToken = token
// under ctx; the error is the client's (a cancelled ctx ends the call).
func (b *bridge) callTokenCtx(ctx context.Context, args map[string]any, token string) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	if token != "" {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	return b.c.CallTool(ctx, req)
}

// TestUpstreamProgress: the real everything server's long-running tool
// reports progress for the token the bridge put on the inner call, and it
// reaches the client inside the run_python call's own progress stream:
// "everything.trigger_long_running_operation: k/4", k increasing, the
// run_python counter increasing throughout.
func TestUpstreamProgress(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
	}, nil))
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mustOK("await mcp_everything.get_sum(a=1, b=2)", "everything") // warm: the run below is the tool's
	rec := &progressRecorder{token: "tok-up"}
	b.c.OnNotification(rec.handle)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := b.callTokenCtx(ctx, map[string]any{
		"code":    "print('start')\nr = await mcp_everything.trigger_long_running_operation(duration=3, steps=4)\nprint(r)",
		"servers": []string{"everything"}, "timeout": 30,
	}, "tok-up")
	if err != nil || r.IsError {
		t.Fatalf("run: %v %v", err, r)
	}
	if got := text(t, r); !strings.Contains(got, "Long running operation completed") {
		t.Fatalf("result: %s", got)
	}
	got, _ := rec.snapshot()
	step := regexp.MustCompile(`^everything\.trigger_long_running_operation: (\d+)/4$`)
	var steps []int
	for i, p := range got {
		if i > 0 && p.Progress <= got[i-1].Progress {
			t.Errorf("progress %v after %v: not increasing", p.Progress, got[i-1].Progress)
		}
		if m := step.FindStringSubmatch(p.Message); m != nil {
			k, _ := strconv.Atoi(m[1])
			steps = append(steps, k)
		}
	}
	t.Logf("%d notifications; upstream steps %v", len(got), steps)
	// Steps 1-3 come 750 ms apart while the call runs; the 4th may trail
	// the inner call's end and is then dropped.
	if len(steps) < 3 {
		t.Errorf("upstream steps %v in %d notifications, want at least 1/4, 2/4, 3/4", steps, len(got))
	}
	for i := 1; i < len(steps); i++ {
		if steps[i] <= steps[i-1] {
			t.Errorf("upstream steps %v: not increasing", steps)
		}
	}
}

// cancelLog reads the notifications/cancelled params the fake server
// recorded, waiting up to 10 s for at least want of them.
func cancelLog(t *testing.T, path string, want int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []map[string]any
		data, _ := os.ReadFile(path)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("cancel log line %q: %v", line, err)
			}
			got = append(got, m)
		}
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCancelled wants exactly n notifications/cancelled, each naming a
// bridge request id, the last with a reason containing reason.
func checkCancelled(t *testing.T, path string, n int, reason string) {
	t.Helper()
	got := cancelLog(t, path, n)
	if len(got) != n {
		t.Fatalf("%d notifications/cancelled recorded, want %d: %v", len(got), n, got)
	}
	last := got[n-1]
	if id, _ := last["requestId"].(string); !strings.HasPrefix(id, "bridge-") {
		t.Errorf("requestId %v: want the bridge's request id", last["requestId"])
	}
	if r, _ := last["reason"].(string); !strings.Contains(r, reason) {
		t.Errorf("reason %q: want it to contain %q", r, reason)
	}
}

// TestUpstreamCancelCallTimeout: an inner call ended by
// MCP_BRIDGE_CALL_TIMEOUT is cancelled upstream.
func TestUpstreamCancelCallTimeout(t *testing.T) {
	requirePodman(t)
	log := filepath.Join(t.TempDir(), "cancelled.jsonl")
	b := startBridge(t, withServers(t, map[string]any{"slow": fake("--cancel-log", log)},
		map[string]string{"MCP_BRIDGE_CALL_TIMEOUT": "1"}))
	b.mustOK("await mcp_slow.add(1, 1)", "slow")
	r := b.call(map[string]any{"code": "await mcp_slow.sleep(30)", "servers": []string{"slow"}, "timeout": 20})
	if got := text(t, r); !strings.Contains(got, "timed out after 1s (MCP_BRIDGE_CALL_TIMEOUT)") {
		t.Fatalf("call timeout: %s", got)
	}
	checkCancelled(t, log, 1, "MCP_BRIDGE_CALL_TIMEOUT")
}

// TestUpstreamCancelSessionEnd: a job's inner call still in flight when
// its session ends (runtime.reset() replaces the container after the call)
// is cancelled upstream with the session's end as the reason.
func TestUpstreamCancelSessionEnd(t *testing.T) {
	requirePodman(t)
	log := filepath.Join(t.TempDir(), "cancelled.jsonl")
	b := startBridge(t, withServers(t, map[string]any{"slow": fake("--cancel-log", log)}, nil))
	b.mustOK("await mcp_slow.add(1, 1)", "slow")
	b.mustOK("async def long():\n    return await mcp_slow.sleep(30)\nj = runtime.start(long())\nimport time\ntime.sleep(1)", "slow")
	// The job's sleep is in flight upstream; nothing cancelled it yet.
	if got := cancelLog(t, log, 0); len(got) != 0 {
		t.Fatalf("cancelled before the session ended: %v", got)
	}
	b.mustOK("runtime.reset()")
	checkCancelled(t, log, 1, "the session ended")
	if got := b.mustOK("await mcp_slow.add(1, 1)", "slow"); got != "{'sum': 2}" {
		t.Errorf("after the reset: %s", got)
	}
}

// TestUpstreamCancelCellEnd: an inner call abandoned because its cell
// timed out, or because the client cancelled the run_python call, is
// cancelled upstream; the session stays usable.
func TestUpstreamCancelCellEnd(t *testing.T) {
	requirePodman(t)
	log := filepath.Join(t.TempDir(), "cancelled.jsonl")
	b := startBridge(t, withServers(t, map[string]any{"slow": fake("--cancel-log", log)}, nil))
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mustOK("await mcp_slow.add(1, 1)", "slow")

	// The cell's timeout.
	r := b.call(map[string]any{"code": "await mcp_slow.sleep(30)", "servers": []string{"slow"}, "timeout": 2})
	if got := text(t, r); !strings.Contains(got, "timed out") {
		t.Fatalf("cell timeout: %s", got)
	}
	checkCancelled(t, log, 1, "")

	// The client cancels the run_python call (mcp-go's client sends
	// notifications/cancelled when the request's context ends).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := b.callTokenCtx(ctx, map[string]any{"code": "await mcp_slow.sleep(30)", "servers": []string{"slow"}, "timeout": 30}, ""); err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	checkCancelled(t, log, 2, "run_python call ended")

	if got := b.mustOK("await mcp_slow.add(1, 1)", "slow"); got != "{'sum': 2}" {
		t.Errorf("after the cancels: %s", got)
	}
}
