package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplay: recorded calls run again with `bridge replay` after the
// bridge (and with it the upstream) is gone, answered from the audit
// trail: the same output and verdict for a call with two inner calls and
// state from an earlier call, with no call reaching the upstream (its own
// log says so); three concurrent inner calls ten times without a false
// divergence; the first divergence and exit 1 for a call whose saved tool
// has since changed; the one-line stop for a result over the record's cap;
// and --since with --tool for many calls at once.
func TestReplay(t *testing.T) {
	requirePodman(t)
	calls := filepath.Join(t.TempDir(), "calls.log")
	env := withServers(t, map[string]any{"fake": fake("--call-log", calls)}, map[string]string{
		"MCP_BRIDGE_AUDIT": "on", "MCP_BRIDGE_KEY_FILE": filepath.Join(t.TempDir(), "key"), "MCP_BRIDGE_STATE_DIR": t.TempDir()})
	b := startBridge(t, env)
	in := func(session, code string) string {
		t.Helper()
		return text(t, b.call(map[string]any{"code": code, "servers": []string{"fake"}, "session": session}))
	}
	in("setup", "async def shout(t):\n    return await mcp_fake.echo(text=t.upper())\nsave_tool(shout)")
	in("default", "x = 20")
	stateful := in("default", "a = await mcp_fake.add(a=x, b=1)\nb = await mcp_fake.echo(text=str(a['sum']))\nprint(x, a['sum'], b)")
	if !strings.Contains(stateful, "20 21 21") {
		t.Fatalf("the stateful call: %s", stateful)
	}
	in("default", "import asyncio\nr = await asyncio.gather(*(mcp_fake.echo(text=c) for c in 'pqr'))\nprint(r)")
	if got := in("default", "print(await shout('hi'))"); !strings.Contains(got, "HI") {
		t.Fatalf("the saved tool's call: %s", got)
	}
	in("default", "r = await mcp_fake.big(bytes=70000)\nprint(len(str(r)))")
	in("setup", "async def shout(t):\n    return await mcp_fake.echo(text=t.lower())\nsave_tool(shout)")
	b.end()

	ids := map[string]string{} // by what the code does
	out, errOut, code := runCLI(t, env, "", "audit", "show", "--json")
	if code != 0 {
		t.Fatalf("audit show: exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct{ ID, Code string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a['sum']", "gather", "shout('hi')", "big"} {
			if strings.Contains(r.Code, k) {
				ids[k] = r.ID
			}
		}
	}
	if len(ids) != 4 {
		t.Fatalf("records found: %v\n%s", ids, out)
	}
	before, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, code = runCLI(t, env, "", "replay", ids["a['sum']"])
	if code != 0 || !strings.Contains(out, "20 21 21") || !strings.Contains(out, "replay "+ids["a['sum']"]+": same: 2 inner calls as recorded") ||
		!strings.Contains(out, `re-ran the 1 earlier calls of session "default"`) {
		t.Errorf("replay of the stateful call: exit %d\n%s%s", code, out, errOut)
	}
	for i := range 10 {
		out, errOut, code = runCLI(t, env, "", "replay", ids["gather"])
		if code != 0 || !strings.Contains(out, ": same: 3 inner calls as recorded") || !strings.Contains(out, "['p', 'q', 'r']") {
			t.Fatalf("replay %d of the concurrent call: exit %d\n%s%s", i+1, code, out, errOut)
		}
	}
	out, errOut, code = runCLI(t, env, "", "replay", ids["shout('hi')"])
	if want := ": diverged: call 1: mcp_fake.echo: arguments differ: text"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("replay after the saved tool changed: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
	out, errOut, code = runCLI(t, env, "", "replay", ids["big"])
	if want := ": stopped: call 1: mcp_fake.big: its result ("; code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "is stored as its digest only") {
		t.Errorf("replay of a result over the cap: exit %d, want 1 and %q\n%s%s", code, want, out, errOut)
	}
	out, errOut, code = runCLI(t, env, "", "replay", "--since", "1h", "--tool", "shout", "--json")
	var got struct{ ID, Verdict, Detail string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); code != 1 || err != nil || got.ID != ids["shout('hi')"] || got.Verdict != "diverged" {
		t.Errorf("replay --since 1h --tool shout --json: exit %d, %+v (%v)\n%s%s", code, got, err, out, errOut)
	}
	if _, errOut, code = runCLI(t, env, "", "replay", "nosuchrecord"); code != 2 || !strings.Contains(errOut, `no call record "nosuchrecord"`) {
		t.Errorf("replay of an unknown id: exit %d: %s", code, errOut)
	}
	after, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("replays reached the upstream: its call log grew from %q to %q", before, after)
	}
}
