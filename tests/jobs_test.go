package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jobsBridge starts a bridge with the real everything server and a fake
// "svc", a policy capping tool calls at 4 per execution, and a 2 s tool-call
// timeout.
func jobsBridge(t *testing.T) (*bridge, string) {
	t.Helper()
	env := withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"svc":        fake(),
	}, map[string]string{"MCP_BRIDGE_CALL_TIMEOUT": "2"})
	policy := filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy")
	if err := os.WriteFile(policy, []byte(`{"maxToolCallsPerExecution": 4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return startBridge(t, env), policy
}

// jobWork is a job started by a call that grants only everything and makes
// one tool call itself. The job sleeps past that call, then calls tools
// between calls (batch 1) and during a later call that grants nothing
// (batch 2), noting each outcome.
const jobWork = `import asyncio, threading
go, between = threading.Event(), threading.Event()
async def work():
    out = []
    async def attempt(coro):
        try:
            out.append(str(await coro))
        except MCPError as e:
            out.append('MCPError: ' + str(e))
    await asyncio.sleep(2)
    await attempt(mcp_everything.echo(message='between calls'))
    await attempt(runtime.call_tool('svc', 'add', {'a': 1, 'b': 2}))
    await attempt(mcp_everything.trigger_long_running_operation(duration=10, steps=2))
    between.set()
    while not go.is_set():
        await asyncio.sleep(0.05)
    await attempt(mcp_everything.echo(message='during another call'))
    await attempt(mcp_everything.get_sum(a=1, b=2))
    return out
print(await mcp_everything.echo(message='now'))
job = runtime.start(work())`

// TestJobKeepsGrant: a background job keeps the grant of the call that
// started it. Its tool calls work after that call returned, between calls
// and during a later call that grants nothing; a server the starting call
// did not grant stays refused; each call is bounded by
// MCP_BRIDGE_CALL_TIMEOUT, not by the long-gone call's deadline; and they
// count against the starting call's maxToolCallsPerExecution. The later
// call itself still may not use the job's servers.
func TestJobKeepsGrant(t *testing.T) {
	requirePodman(t)
	b, policy := jobsBridge(t)
	if got := b.mustOK(jobWork, "everything"); got != "Echo: now" {
		t.Fatalf("starting call: %q", got)
	}
	time.Sleep(8 * time.Second) // the job's batch 1 runs while no call is active
	got := b.mustOK("print('between:', between.is_set())\ngo.set()\nfor line in runtime.result(job, wait=30):\n    print(line)")
	lines := strings.Split(got, "\n")
	want := []string{
		"between: True",
		"Echo: between calls",
		`MCPError: Server 'svc' is not available: server 'svc' is configured but not granted to this call; pass servers=["svc"] to run_python`,
		"MCPError: Tool call everything.trigger-long-running-operation timed out after 2s (MCP_BRIDGE_CALL_TIMEOUT)",
		"Echo: during another call",
		"MCPError: Tool call limit of 4 per execution reached (maxToolCallsPerExecution in " + policy + ")",
	}
	if len(lines) != len(want) {
		t.Fatalf("collected:\n%s\nwant %d lines:\n%s", got, len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got: %s\nwant: %s", i, lines[i], want[i])
		}
	}
	// The job's proxy is still bound, but this call grants nothing.
	r := b.run("await mcp_everything.echo(message='x')")
	if got := text(t, r); !r.IsError || !strings.Contains(got, "server 'everything' is configured but not granted to this call") {
		t.Errorf("a call without the grant used the job's proxy: %s", got)
	}
}

// TestJobForgedToken: the host serves a job's requests with the grant it
// bound to the job's token itself. A token it never issued is refused, and
// a genuine token grants only what its starting call granted, whatever the
// call presenting it grants.
func TestJobForgedToken(t *testing.T) {
	requirePodman(t)
	b, _ := jobsBridge(t)
	b.mustOK("job = runtime.start('import time\\ntime.sleep(60)')", "everything")
	const forge = `import sys
JOB = sys.modules['mcp._link'].JOB
async def as_job(token, server, tool, args):
    t = JOB.set(token)
    try:
        return str(await runtime.call_tool(server, tool, args))
    except MCPError as e:
        return 'MCPError: ' + str(e)
    finally:
        JOB.reset(t)
print(await as_job('00' * 16, 'everything', 'echo', {'message': 'x'}))
print(await as_job(job._token, 'svc', 'add', {'a': 1, 'b': 2}))`
	got := b.mustOK(forge, "svc")
	want := "MCPError: Unknown job token: this session never issued it, or forgot it after 64 newer calls started jobs; start the job again with runtime.start\n" +
		`MCPError: Server 'svc' is not available: server 'svc' is configured but not granted to this call; pass servers=["svc"] to run_python`
	if got != want {
		t.Errorf("forged requests:\n got: %s\nwant: %s", got, want)
	}
	// The link still works for honest calls.
	if got := b.mustOK("(await mcp_svc.add(a=1, b=2))['sum']", "svc"); got != "3" {
		t.Errorf("after the forgeries: %s", got)
	}
}

// TestJobProgress: while runtime.result(job, wait=...) waits, the job's
// newest output streams as the call's progress notifications, not only a
// "running" heartbeat; the collected output is the job's, once.
func TestJobProgress(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mustOK("job = runtime.start('import time\\nfor i in range(15):\\n    print(\"tick\", i)\\n    time.sleep(0.2)\\n\"done\"')")
	rec := &progressRecorder{token: "tok-job"}
	b.c.OnNotification(rec.handle)
	r := b.callWithProgress("runtime.result(job, wait=20)", "tok-job")
	if got := text(t, r); r.IsError || !strings.Contains(got, "tick 14\n") || !strings.HasSuffix(got, "'done'") {
		t.Errorf("collected: %s", got)
	}
	got, _ := rec.snapshot()
	ticks := 0
	for _, p := range got {
		if strings.HasPrefix(p.Message, "tick ") {
			ticks++
		}
	}
	if ticks < 2 {
		t.Errorf("%d of %d progress notifications carried the job's output, want at least 2: %+v", ticks, len(got), got)
	}
}
