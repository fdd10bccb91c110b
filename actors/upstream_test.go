package actors

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func TestUpstreamMessage(t *testing.T) {
	four := 4.0
	for _, tc := range []struct {
		u    UpstreamProgress
		want string
	}{
		{UpstreamProgress{Progress: 2, Total: &four}, "s.t: 2/4"},
		{UpstreamProgress{Progress: 2, Total: &four, Message: " copying "}, "s.t: 2/4 copying"},
		{UpstreamProgress{Progress: 0.5}, "s.t: 0.5"},
		{UpstreamProgress{Progress: 1, Message: "a\x1b[2Jb"}, `s.t: 1 a\x1b[2Jb`},
		{UpstreamProgress{Status: "working", Message: "Gathering sources..."}, "s.t: working Gathering sources..."},
		{UpstreamProgress{Status: "input_required", Total: &four}, "s.t: input_required"},
	} {
		if got := upstreamMessage("s.t", tc.u); got != tc.want {
			t.Errorf("upstreamMessage(%+v) = %q, want %q", tc.u, got, tc.want)
		}
	}
	long := upstreamMessage("s.t", UpstreamProgress{Progress: 1, Message: strings.Repeat("x", 10000)})
	if len(long) > maxUpstreamMessage+64 {
		t.Errorf("a 10000-byte message became %d bytes", len(long))
	}
}

func TestProgressRoutes(t *testing.T) {
	var p progressRoutes
	var got []UpstreamProgress
	p.add("bridge-1", func(u UpstreamProgress) { got = append(got, u) })
	p.deliver(map[string]any{"progressToken": "bridge-1", "progress": 1.0, "total": 3.0, "message": "m"})
	p.deliver(map[string]any{"progressToken": "bridge-2", "progress": 1.0}) // not ours
	p.deliver(map[string]any{"progressToken": "bridge-1", "progress": "x"}) // malformed
	p.remove("bridge-1")
	p.deliver(map[string]any{"progressToken": "bridge-1", "progress": 2.0}) // the call ended
	if len(got) != 1 || got[0].Progress != 1 || got[0].Total == nil || *got[0].Total != 3 || got[0].Message != "m" {
		t.Errorf("delivered %+v, want the one notification of the live call", got)
	}
}

// TestStreamProgressUpstream: a flood of inner call progress is coalesced
// to at most one notification per upstreamEvery, the newest message, under
// the one increasing counter; the pending message of an inner call that
// ended is dropped.
func TestStreamProgressUpstream(t *testing.T) {
	a := &activeCall{limit: 1 << 20}
	var mu sync.Mutex
	var got []string
	var ns []int
	stop := a.streamProgress(func(n int, msg string) {
		mu.Lock()
		defer mu.Unlock()
		ns = append(ns, n)
		got = append(got, msg)
	})
	start := time.Now()
	for i := 0; time.Since(start) < time.Second; i++ {
		a.upstream(1, "s.t: "+strings.Repeat("x", i%3))
		time.Sleep(time.Millisecond)
	}
	a.upstream(1, "s.t: last")
	time.Sleep(3 * upstreamEvery)
	a.upstream(2, "s.u: dropped")
	a.ended(2, false)
	time.Sleep(3 * upstreamEvery)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 5 || len(got) > 13 {
		t.Errorf("%d notifications in ~1.3 s of a flood, want 5..13 (at most 10 a second)", len(got))
	}
	for i := range ns {
		if ns[i] != i+1 {
			t.Errorf("counter %v: want 1, 2, 3, ...", ns)
			break
		}
	}
	if len(got) > 0 && got[len(got)-1] != "s.t: last" {
		t.Errorf("last message %q, want the newest, %q", got[len(got)-1], "s.t: last")
	}
	for _, m := range got {
		if m == "s.u: dropped" {
			t.Errorf("progress of an inner call that ended was sent")
		}
	}
}

// TestCallProgressAndCancel: Client.Call puts a progress token of its own
// on the request and relays the server's progress for it; a call its
// context abandons is cancelled at the server (notifications/cancelled).
func TestCallProgressAndCancel(t *testing.T) {
	s := server.NewMCPServer("fake", "1")
	s.AddTool(mcp.NewTool("steps"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
			return mcp.NewToolResultError("no progress token"), nil
		}
		for i := 1; i <= 2; i++ {
			_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
				map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": 2, "message": "step"})
			time.Sleep(50 * time.Millisecond) // progress that trails the result is dropped
		}
		return mcp.NewToolResultText("ok"), nil
	})
	cancelled := make(chan struct{}, 1)
	s.AddTool(mcp.NewTool("block"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			cancelled <- struct{}{}
		case <-time.After(20 * time.Second):
		}
		return mcp.NewToolResultText("late"), nil
	})
	// Over stdio (here a pipe) nothing but notifications/cancelled can stop
	// the server's handler: an HTTP client would end the request's stream.
	c := pipeClient(t, s, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var mu sync.Mutex
	var got []UpstreamProgress
	if _, err := c.Call(ctx, "steps", nil, 5*time.Second, "test", func(u UpstreamProgress) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, u)
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 2 || got[1].Progress != 2 || got[1].Message != "step" {
		t.Errorf("progress %+v, want steps 1 and 2", got)
	}
	mu.Unlock()

	callCtx, end := context.WithCancelCause(ctx)
	go func() {
		time.Sleep(200 * time.Millisecond)
		end(errCallEnded)
	}()
	if _, err := c.Call(callCtx, "block", nil, 10*time.Second, "test", nil); err == nil {
		t.Fatal("the abandoned call returned a result")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's handler was not cancelled")
	}
}
