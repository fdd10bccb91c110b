package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTaskRequiredTool: the real everything server's
// simulate-research-query must be called as a task (taskSupport
// "required"; a plain call fails with -32601). From Python it is one
// await that returns the report, and the task's status reaches the
// client inside the run_python call's progress stream.
func TestTaskRequiredTool(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
	}, nil))
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mustOK("await mcp_everything.get_sum(a=1, b=2)", "everything") // warm: the run below is the task's
	rec := &progressRecorder{token: "tok-task"}
	b.c.OnNotification(rec.handle)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r, err := b.callTokenCtx(ctx, map[string]any{
		"code":    "r = await mcp_everything.simulate_research_query(topic='tides')\nprint(r.splitlines()[0])",
		"servers": []string{"everything"}, "timeout": 60,
	}, "tok-task")
	if err != nil || r.IsError {
		t.Fatalf("run: %v %v", err, r)
	}
	if got := text(t, r); !strings.Contains(got, "# Research Report: tides") {
		t.Fatalf("result: %s", got)
	}
	got, _ := rec.snapshot()
	var statuses []string
	for _, p := range got {
		if strings.HasPrefix(p.Message, "everything.simulate_research_query: ") {
			statuses = append(statuses, p.Message)
		}
	}
	t.Logf("%d notifications; task statuses %q", len(got), statuses)
	if len(statuses) < 2 || !strings.Contains(strings.Join(statuses, "\n"), "working") {
		t.Errorf("task statuses %q, want at least two working stages", statuses)
	}
}

// TestTaskCancel: a fake server's task-required tool is called as a task
// and its result returned; a task-optional one is called plainly; a task
// abandoned because its cell timed out, or because the client cancelled the
// run_python call, is cancelled upstream with tasks/cancel naming the task.
func TestTaskCancel(t *testing.T) {
	requirePodman(t)
	log := filepath.Join(t.TempDir(), "cancelled.jsonl")
	b := startBridge(t, withServers(t, map[string]any{"slow": fake("--cancel-log", log)}, nil))
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.mustOK("print(await mcp_slow.task_sleep(0.5), await mcp_slow.task_optional())", "slow"); got != "slept 0.5 as a task: false" {
		t.Errorf("task tools: %q", got)
	}
	r := b.call(map[string]any{"code": "await mcp_slow.task_sleep(30)", "servers": []string{"slow"}, "timeout": 2})
	if got := text(t, r); !strings.Contains(got, "timed out") {
		t.Fatalf("cell timeout: %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := b.callTokenCtx(ctx, map[string]any{"code": "await mcp_slow.task_sleep(30)", "servers": []string{"slow"}, "timeout": 30}, ""); err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	got := cancelLog(t, log, 2)
	if len(got) != 2 {
		t.Fatalf("%d cancels recorded, want 2 tasks/cancel: %v", len(got), got)
	}
	for _, c := range got {
		if id, _ := c["taskId"].(string); id == "" {
			t.Errorf("cancel %v: want tasks/cancel with the task's id", c)
		}
	}
	if got[0]["taskId"] == got[1]["taskId"] {
		t.Errorf("both cancels name task %v", got[0]["taskId"])
	}
	if got := b.mustOK("await mcp_slow.add(1, 1)", "slow"); got != "{'sum': 2}" {
		t.Errorf("after the cancels: %s", got)
	}
}
