package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// heldFront is a Front whose run asks its human twice and counts its runs,
// so a test can tell a held call (one run) from a replay (two).
func heldFront(t *testing.T, timeout time.Duration) (*Front, *atomic.Int32) {
	var runs atomic.Int32
	f := NewFront(FrontConfig{
		Dispatcher: &Dispatcher{Router: &Router{ApprovalTimeout: timeout}},
		Render: func(r result.Result) *mcp.CallToolResult {
			if r.Error != "" {
				return mcp.NewToolResultError(r.Error)
			}
			return mcp.NewToolResultText(r.Output[0].Data)
		},
		Run: func(ctx context.Context, raw json.RawMessage) result.Result {
			n := runs.Add(1)
			h := HumanFrom(ctx)
			var got []string
			for i := 0; i < 2; i++ {
				res, err := h.Elicit(ctx, approvalForm("memory", "create_entities", raw))
				got = append(got, answer(res, err))
			}
			return result.Result{Status: result.StatusSuccess, Output: []result.Chunk{{Data: fmt.Sprintf("runs=%d answers=%v", n, got)}}}
		},
	})
	t.Cleanup(f.Close)
	return f, &runs
}

func modernCtx(ctx context.Context, principal string) context.Context {
	caps := mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}
	ctx = server.WithRequestProtocolInfo(ctx, &server.RequestProtocolInfo{Modern: true, ProtocolVersion: "2026-07-28", ClientCapabilities: &caps})
	return WithPrincipal(ctx, principal)
}

func toolReq(args string, state string, answers mcp.InputResponses) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = "run_python"
	req.Params.RawArguments = json.RawMessage(args)
	req.Params.RequestState = state
	req.Params.InputResponses = answers
	return req
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func decided(d string) mcp.InputResponse {
	return mcp.NewElicitationInputResponse(mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": d}}})
}

// TestFrontInputRequired: a 2026-07-28 call that asks gets input_required
// with the form and a requestState; each retry answers and resumes the
// same run (runs=1); a used, forged or other principal's requestState is
// refused with one line and resumes nothing.
func TestFrontInputRequired(t *testing.T) {
	f, runs := heldFront(t, time.Minute)
	ctx := modernCtx(context.Background(), "alice")
	args := `{"code":"x"}`
	res, err := f.callTool(ctx, toolReq(args, "", nil))
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: %+v %v", res, err)
	}
	q, ok := res.InputRequests["q1"]
	if !ok || q.Elicitation == nil || !strings.Contains(q.Elicitation.Message, "memory.create_entities") {
		t.Fatalf("first round asks %+v", res.InputRequests)
	}
	first := res.RequestState

	for _, tc := range []struct {
		name, principal, state, want string
	}{
		{"forged", "alice", "AAAA" + first[4:], "requestState is unknown"},
		{"other principal", "bob", first, "requestState is unknown"},
		{"without state", "alice", "", "inputResponses came without the requestState"},
	} {
		r, _ := f.callTool(modernCtx(context.Background(), tc.principal), toolReq(args, tc.state, mcp.InputResponses{"q1": decided("once")}))
		if !r.IsError || !strings.Contains(textOf(r), tc.want) || strings.Contains(textOf(r), "\n") {
			t.Errorf("%s: %q, want one line with %q", tc.name, textOf(r), tc.want)
		}
	}

	res, _ = f.callTool(ctx, toolReq(args, first, mcp.InputResponses{"q1": decided("once")}))
	if !res.NeedsInput() || res.InputRequests["q2"].Elicitation == nil || res.RequestState == first {
		t.Fatalf("second round: %+v", res)
	}
	r, _ := f.callTool(ctx, toolReq(args, first, mcp.InputResponses{"q1": decided("once")}))
	if !strings.Contains(textOf(r), "already used") {
		t.Errorf("a reused requestState: %q", textOf(r))
	}
	res, _ = f.callTool(ctx, toolReq(args, res.RequestState, mcp.InputResponses{"q2": decided("deny")}))
	if got, want := textOf(res), "runs=1 answers=[once deny]"; got != want {
		t.Errorf("final result %q, want %q", got, want)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the call ran %d times, want 1 (held, not replayed)", n)
	}
}

// TestFrontInputExpires: with no retry within the approval timeout the
// call's question is refused, the held call is interrupted and the late
// retry is told its requestState expired; a cancelled attached request
// interrupts its call too.
func TestFrontInputExpires(t *testing.T) {
	f, _ := heldFront(t, 200*time.Millisecond)
	ctx := modernCtx(context.Background(), "")
	res, _ := f.callTool(ctx, toolReq(`{"code":"y"}`, "", nil))
	if !res.NeedsInput() {
		t.Fatalf("first round: %+v", res)
	}
	time.Sleep(500 * time.Millisecond)
	r, _ := f.callTool(ctx, toolReq(`{"code":"y"}`, res.RequestState, mcp.InputResponses{"q1": decided("once")}))
	if !strings.Contains(textOf(r), "requestState expired") {
		t.Errorf("a late retry: %q", textOf(r))
	}
	if n := f.inputs.outstanding(); n != 0 {
		t.Errorf("%d requestStates outstanding", n)
	}

	// A request cancelled while its call runs interrupts the call.
	cctx, cancel := context.WithCancel(ctx)
	blocked := make(chan struct{})
	f.cfg.Run = func(ctx context.Context, _ json.RawMessage) result.Result {
		close(blocked)
		<-ctx.Done()
		return result.Result{Status: result.StatusError, Error: "interrupted"}
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() { r, _ := f.callTool(cctx, toolReq(`{"code":"z"}`, "", nil)); done <- r }()
	<-blocked
	cancel()
	select {
	case r := <-done:
		if !r.IsError {
			t.Errorf("cancelled: %q", textOf(r))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled request did not end its call")
	}
}
