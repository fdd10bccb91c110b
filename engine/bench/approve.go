package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// approvalCycles is the number of approve/deny cycles measured.
const approvalCycles = 1000

// approver is the bench client's elicitation handler: it answers every
// approval form at once, once and deny in turn, so what is timed is the
// bridge's round trip without a human.
type approver struct{ n atomic.Int64 }

func (a *approver) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	decision := "once"
	if a.n.Add(1)%2 == 0 {
		decision = "deny"
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": decision}}}, nil
}

// approveFigures measures the approval gate against a bridge whose policy
// gates the bench server's count tool: the round trip a gated call adds
// over the same call ungated (the client answers at once: no human), and
// 1,000 approve/deny cycles, after which the server must have seen the
// approved calls only.
func approveFigures(ctx context.Context, o Options, r *Report) error {
	env, rm, err := isolated(o, map[string]any{"bench": benchServer(o, 0, false)})
	if err != nil {
		return err
	}
	defer rm()
	dir := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "MCP_BRIDGE_CONFIG_DIR="); ok {
			dir = v
		}
	}
	policy, _ := json.Marshal(map[string]any{"servers": map[string]any{"bench": map[string]any{"approve": []string{"count"}}}})
	if err := os.WriteFile(filepath.Join(dir, "bridge.policy"), policy, 0o600); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	a := &approver{}
	p, err := startMCP(ctx, []string{o.Bridge, "run"}, env, client.WithElicitationHandler(a))
	if err != nil {
		return err
	}
	defer p.close()
	samples := max(50, o.Samples)

	// Gated count against ungated echo, both timed in the sandbox, the
	// first 5 of each warm-up. The approver denies every other form: only
	// the approved calls are timed, so both loops time one call that
	// reaches the server.
	res, err := p.runWith(ctx, timedLoopApproved(samples+5), "bench")
	if err != nil {
		return err
	}
	approved, err := secondsList(res)
	if err != nil {
		return err
	}
	approved = approved[5:]
	res, err = p.runWith(ctx, timedLoop(samples+5, `await mcp_bench.echo("x")`), "bench")
	if err != nil {
		return err
	}
	plain, err := secondsList(res)
	if err != nil {
		return err
	}
	plain = plain[5:]
	g50, p50 := ms(pct(approved, 50)), ms(pct(plain, 50))
	over := g50 - p50
	r.add(Figure{ID: "approve.roundtrip.p50", Name: "approval round trip a gated call adds (client answers at once), p50", Value: max(over, 0), Unit: "ms",
		Baseline: "the same call ungated, p50", BaseVal: p50, Samples: len(approved), Target: "<= 20 ms"}, over <= 20)

	// 1,000 approve/deny cycles: the server must see exactly the
	// approved calls.
	before, err := p.runWith(ctx, "print(await mcp_bench.calls())", "bench")
	if err != nil {
		return err
	}
	res, err = p.runPython(ctx, map[string]any{"code": fmt.Sprintf(`ok = denied = 0
for i in range(%d):
    try:
        await mcp_bench.count()
        ok += 1
    except MCPError as e:
        if e.kind != "denied":
            raise
        denied += 1
print(ok, denied)`, approvalCycles), "servers": []string{"bench"}, "timeout": 600})
	if err != nil {
		return err
	}
	var ok, denied int
	if _, err := fmt.Sscanf(strings.TrimSpace(res), "%d %d", &ok, &denied); err != nil || ok+denied != approvalCycles {
		return fmt.Errorf("bench: approval cycles printed %q", res)
	}
	after, err := p.runWith(ctx, "print(await mcp_bench.calls())", "bench")
	if err != nil {
		return err
	}
	b, err1 := strconv.Atoi(strings.TrimSpace(before))
	c, err2 := strconv.Atoi(strings.TrimSpace(after))
	if err1 != nil || err2 != nil {
		return fmt.Errorf("bench: the server's call count: %q, %q", before, after)
	}
	extra := float64(c - b - ok)
	r.add(Figure{ID: "approve.denied.leaks", Name: fmt.Sprintf("calls reaching the server beyond the approved ones, in %d approve/deny cycles (%d denied)", approvalCycles, denied),
		Value: extra, Unit: "calls", Baseline: "approved calls", BaseVal: float64(ok), Samples: approvalCycles, Target: "= 0"}, extra == 0)
	return nil
}

// timedLoopApproved times n gated calls that the approver approves: it
// answers once and deny in turn, so each approved call is followed by a
// denied one, which is not timed.
func timedLoopApproved(n int) string {
	return fmt.Sprintf(`import time as _t, json as _j
_d = []
while len(_d) < %d:
    _s = _t.perf_counter()
    try:
        await mcp_bench.count()
    except MCPError:
        continue
    _d.append(_t.perf_counter() - _s)
print(_j.dumps([round(x * 1e7) for x in _d], separators=(",", ":")))`, n)
}
