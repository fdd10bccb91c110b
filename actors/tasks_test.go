package actors

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol"
)

// pipeClient runs a client actor whose server is s, served over a pipe as
// a stdio child would be, until the test ends.
func pipeClient(t *testing.T, s *server.MCPServer, callTimeout time.Duration) *Client {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: callTimeout, Store: noStore{},
		OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.Nop(),
		dial: func(_ context.Context, conn *serverConn) error {
			hostR, serverW := net.Pipe()
			serverR, hostW := net.Pipe()
			sctx, stop := context.WithCancel(context.Background())
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = server.NewStdioServer(s).Listen(sctx, serverR, serverW)
			}()
			conn.tr = transport.NewIO(hostR, hostW, nil)
			conn.mc = client.NewClient(conn.tr)
			conn.cancel = func() {
				stop()
				for _, c := range []net.Conn{hostR, hostW, serverR, serverW} {
					_ = c.Close()
				}
			}
			return conn.mc.Start(context.Background())
		}}
	c := NewClient(ServerSpec{Name: "fake", Type: "stdio", Hash: "h"}, deps)
	sup := quietSupervisor("client-test")
	sup.Add(c)
	serveUntilCleanup(t, sup)
	return c
}

// sinkRecorder is an upstreamSink that keeps the messages.
type sinkRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (s *sinkRecorder) upstream(_ uint64, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msg)
}

func (s *sinkRecorder) began(uint64, string) {}

func (s *sinkRecorder) ended(uint64, bool) {}

func (s *sinkRecorder) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.msgs, "\n")
}

// TestCallTask: through the router, a tool whose execution.taskSupport is
// "required" is called as a task and its result comes back as the call's,
// with the task's status relayed as progress; an optional one is called
// plainly; a task whose call is abandoned (the caller's context, or the
// call timeout) is cancelled at the server with tasks/cancel.
func TestCallTask(t *testing.T) {
	// mcp-go ends a task handler's context with the tools/call that
	// created it, so the server sees tasks/cancel through its hook.
	cancelled := make(chan struct{}, 2)
	hooks := &server.TaskHooks{}
	hooks.AddOnTaskCancelled(func(context.Context, server.TaskMetrics) { cancelled <- struct{}{} })
	s := server.NewMCPServer("fake", "1", server.WithTaskCapabilities(true, true, true), server.WithTaskHooks(hooks))
	s.AddTaskTool(mcp.NewTool("research", mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CreateTaskResult, error) {
			time.Sleep(300 * time.Millisecond)
			return &mcp.CreateTaskResult{Content: []mcp.Content{mcp.NewTextContent("report")}}, nil
		})
	release := make(chan struct{})
	s.AddTaskTool(mcp.NewTool("block", mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CreateTaskResult, error) {
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
			return &mcp.CreateTaskResult{Content: []mcp.Content{mcp.NewTextContent("late")}}, nil
		})
	s.AddTool(mcp.NewTool("optional", mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("as a task: " + map[bool]string{true: "yes", false: "no"}[req.Params.Task != nil]), nil
		})
	c := pipeClient(t, s, 5*time.Second)
	t.Cleanup(func() { close(release) }) // before the pipe's cleanup waits for the server
	r := NewRouter()
	r.CallTimeout, r.Log = 5*time.Second, zerolog.Nop()
	sup := quietSupervisor("router-test")
	sup.Add(r)
	serveUntilCleanup(t, sup)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-r.publish(catalogSource{specs: []ServerSpec{c.Spec()}, clients: map[string]*Client{"fake": c}, tools: map[string][]ToolInfo{"fake": tools}})
	sink := &sinkRecorder{}
	scope := Scope{Servers: []string{"fake"}, progress: sink}
	call := func(ctx context.Context, tool string) (string, error) {
		got, err := r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(`{"server":"fake","tool":"`+tool+`"}`))
		raw, _ := json.Marshal(got)
		return string(raw), err
	}

	got, err := call(ctx, "research")
	if err != nil || !strings.Contains(got, `"text":"report"`) {
		t.Errorf("research: %s %v, want the task's result", got, err)
	}
	if msgs := sink.all(); !strings.Contains(msgs, "fake.research: working") {
		t.Errorf("progress %q, want the task's status", msgs)
	}
	if got, err := call(ctx, "optional"); err != nil || !strings.Contains(got, "as a task: no") {
		t.Errorf("optional: %s %v, want a plain call", got, err)
	}

	callCtx, end := context.WithCancelCause(ctx)
	time.AfterFunc(300*time.Millisecond, func() { end(errCallEnded) })
	if got, err := call(callCtx, "block"); err == nil {
		t.Errorf("the abandoned task returned a result: %s", got)
	}
	r.CallTimeout = 300 * time.Millisecond
	if _, err := call(ctx, "block"); err == nil || !strings.Contains(err.Error(), "Tool call fake.block timed out after 1s (MCP_BRIDGE_CALL_TIMEOUT)") {
		t.Errorf("timed out task: %v", err)
	}
	for i := 0; i < 2; i++ {
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("task %d was not cancelled at the server", i+1)
		}
	}
}

func TestPollInterval(t *testing.T) {
	ms := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		in   *int64
		want time.Duration
	}{
		{nil, taskPollDefault}, {ms(0), taskPollDefault}, {ms(-5), taskPollDefault},
		{ms(1), taskPollMin}, {ms(2500), 2500 * time.Millisecond}, {ms(1 << 40), taskPollMax},
	} {
		if got := pollInterval(tc.in); got != tc.want {
			t.Errorf("pollInterval(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRequiresTask(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`{"name":"a","execution":{"taskSupport":"required"}}`, true},
		{`{"name":"a","execution":{"taskSupport":"optional"}}`, false},
		{`{"name":"a","execution":{}}`, false},
		{`{"name":"a"}`, false},
		{`{"name":"a","execution":"required"}`, false},
	} {
		if got := requiresTask(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("requiresTask(%s) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

// TestTaskCalls: a task in flight is attributed to the inner call that
// created it, until that call ends.
func TestTaskCalls(t *testing.T) {
	var tc taskCalls
	if _, ok := tc.lookup("t1"); ok {
		t.Error("an unknown task was found")
	}
	tc.add("t1", "srv.tool")
	if got, ok := tc.lookup("t1"); !ok || got != "srv.tool" {
		t.Errorf("lookup = %q %v, want srv.tool", got, ok)
	}
	tc.remove("t1")
	if _, ok := tc.lookup("t1"); ok {
		t.Error("a task of an ended call was found")
	}
}
