package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol"
)

// fakeHuman answers every form with answer (nil: waits for ctx), and
// records what it was asked.
type fakeHuman struct {
	caps   HumanCaps
	answer func() (*mcp.ElicitationResult, error)
	mu     sync.Mutex
	asked  []mcp.ElicitationRequest
}

func (h *fakeHuman) Caps() HumanCaps { return h.caps }
func (h *fakeHuman) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.mu.Lock()
	h.asked = append(h.asked, req)
	h.mu.Unlock()
	if h.answer == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.answer()
}
func (h *fakeHuman) Sample(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return nil, errors.New("no sampling")
}

func (h *fakeHuman) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.asked)
}

func accept(decision string) func() (*mcp.ElicitationResult, error) {
	return func() (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": decision}}}, nil
	}
}

func action(a mcp.ElicitationResponseAction) func() (*mcp.ElicitationResult, error) {
	return func() (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: a}}, nil
	}
}

// gatedServer is an in-process server whose tools count the calls that
// reach it: create (gated by name), wipe (destructiveHint: true) and read.
func gatedServer(t *testing.T, calls *atomic.Int64) ServerSpec {
	t.Helper()
	s := server.NewMCPServer("fake", "1")
	count := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return mcp.NewToolResultText("ok"), nil
	}
	s.AddTool(mcp.NewTool("create", mcp.WithString("name")), count)
	s.AddTool(mcp.NewTool("wipe", mcp.WithDestructiveHintAnnotation(true)), count)
	s.AddTool(mcp.NewTool("read", mcp.WithDestructiveHintAnnotation(false)), count)
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return ServerSpec{Name: "fake", Type: "http", URL: hs.URL + "/mcp", Hash: "h"}
}

// gatedRouter serves gatedServer under policy.
func gatedRouter(t *testing.T, calls *atomic.Int64, policy *Policy) *Router {
	t.Helper()
	c := startClient(t, gatedServer(t, calls), func(string, string, []ToolInfo) {})
	r := NewRouter()
	r.CallTimeout = 5 * time.Second
	r.ApprovalTimeout = 300 * time.Millisecond
	r.Log = zerolog.Nop()
	sup := quietSupervisor("router-test")
	sup.Add(r)
	serveUntilCleanup(t, sup)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-r.publish(catalogSource{specs: []ServerSpec{c.Spec()}, clients: map[string]*Client{"fake": c},
		tools: map[string][]ToolInfo{"fake": tools}, policy: policy})
	return r
}

// errKind is the kind of a link error; "" for no error.
func errKind(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	kind, _ := linkKind(t, err)
	return kind
}

// TestApprovalGate: a gated call reaches the server only when the human
// answers once or run; every other outcome (deny, decline, cancel, an
// error, no answer in time, a client without elicitation) raises kind
// denied and sends nothing upstream.
func TestApprovalGate(t *testing.T) {
	var calls atomic.Int64
	on := true
	pol, err := NewPolicy("bridge.policy", 0, map[string]ServerPolicy{"fake": {Approve: []string{"cre*"}, ApproveDestructive: &on}})
	if err != nil {
		t.Fatal(err)
	}
	r := gatedRouter(t, &calls, pol)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	form := HumanCaps{Form: true}
	for _, tc := range []struct {
		name     string
		tool     string
		caps     HumanCaps
		answer   func() (*mcp.ElicitationResult, error)
		wantKind string // "" = the call went through
		wantAsks int
	}{
		{"once", "create", form, accept("once"), "", 1},
		{"deny", "create", form, accept("deny"), protocol.KindDenied, 1},
		{"unknown decision", "create", form, accept("yes"), protocol.KindDenied, 1},
		{"empty accept", "create", form, action(mcp.ElicitationResponseActionAccept), protocol.KindDenied, 1},
		{"decline", "create", form, action(mcp.ElicitationResponseActionDecline), protocol.KindDenied, 1},
		{"cancel", "wipe", form, action(mcp.ElicitationResponseActionCancel), protocol.KindDenied, 1},
		{"error", "create", form, func() (*mcp.ElicitationResult, error) { return nil, errors.New("broken pipe") }, protocol.KindDenied, 1},
		{"timeout", "create", form, nil, protocol.KindDenied, 1},
		{"no elicitation", "create", HumanCaps{Missing: noElicitation}, accept("once"), protocol.KindDenied, 0},
		{"destructive once", "wipe", form, accept("once"), "", 1},
		{"not gated", "read", form, accept("deny"), "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHuman{caps: tc.caps, answer: tc.answer}
			a := &activeCall{asks: newApprovals(h)}
			scope := Scope{Servers: []string{"fake"}, human: a}
			before := calls.Load()
			_, err := r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(`{"server":"fake","tool":"`+tc.tool+`","arguments":{}}`))
			if got := errKind(t, err); got != tc.wantKind {
				t.Errorf("kind %q (%v), want %q", got, err, tc.wantKind)
			}
			reached := calls.Load() - before
			if want := int64(0); tc.wantKind != "" && reached != want {
				t.Errorf("%d calls reached the server after a refusal, want 0", reached)
			}
			if tc.wantKind == "" && reached != 1 {
				t.Errorf("%d calls reached the server, want 1", reached)
			}
			if got := h.count(); got != tc.wantAsks {
				t.Errorf("asked %d times, want %d", got, tc.wantAsks)
			}
			if tc.name == "timeout" && a.asks.pausedFor() < 250*time.Millisecond {
				t.Errorf("the wait for an answer (%s) did not move the deadline", a.asks.pausedFor())
			}
		})
	}
}

// TestApprovalRunGrant: "run" approves server.tool for the rest of the
// call: concurrent gated calls queue behind one form, and one answer
// covers them all; another call asks again.
func TestApprovalRunGrant(t *testing.T) {
	var calls atomic.Int64
	pol, err := NewPolicy("bridge.policy", 0, map[string]ServerPolicy{"fake": {Approve: []string{"create"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := gatedRouter(t, &calls, pol)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := &fakeHuman{caps: HumanCaps{Form: true}, answer: func() (*mcp.ElicitationResult, error) {
		time.Sleep(50 * time.Millisecond)
		return accept("run")()
	}}
	a := &activeCall{asks: newApprovals(h)}
	scope := Scope{Servers: []string{"fake"}, human: a}
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(`{"server":"fake","tool":"create","arguments":{"name":"x"}}`)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := h.count(); got != 1 {
		t.Errorf("asked %d times for 5 concurrent calls after a run answer, want 1", got)
	}
	if got := calls.Load(); got != 5 {
		t.Errorf("%d calls reached the server, want 5", got)
	}
	msg := h.asked[0].Params.Message
	if !strings.Contains(msg, "fake.create") || !strings.Contains(msg, `"name":"x"`) {
		t.Errorf("form message %q does not name fake.create and preview the arguments", msg)
	}
	schema, _ := json.Marshal(h.asked[0].Params.RequestedSchema)
	if !strings.Contains(string(schema), `"required":["decision"]`) || strings.Contains(string(schema), "default") {
		t.Errorf("form schema %s: want one required decision field without a default", schema)
	}
	// A new run_python call starts with no grant.
	b := &activeCall{asks: newApprovals(h)}
	if _, err := r.ServeSandbox(ctx, Scope{Servers: []string{"fake"}, human: b}, protocol.MethodCallTool, json.RawMessage(`{"server":"fake","tool":"create"}`)); err != nil {
		t.Fatal(err)
	}
	if got := h.count(); got != 2 {
		t.Errorf("asked %d times, want 2: a grant lasts one run_python call", got)
	}
}

// TestApprovalJobWaitsForCall: a job's gated call made while no call is
// active waits for the next call, and its human answers it.
func TestApprovalJobWaitsForCall(t *testing.T) {
	sb := &sandbox{}
	j := jobSink{sb}
	got := make(chan *approvals, 1)
	go func() {
		a, _ := j.approvals(context.Background())
		got <- a
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("the job's call did not wait for a call")
	default:
	}
	call := &activeCall{asks: newApprovals(&fakeHuman{})}
	sb.setActive(call)
	select {
	case a := <-got:
		if a != call.asks {
			t.Error("the job's call got another call's approvals")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the job's call was not woken by the call that became active")
	}
	ctx, cancel := context.WithCancel(context.Background())
	sb.setActive(nil)
	cancel()
	if _, err := j.approvals(ctx); err == nil {
		t.Error("a wait whose context ended returned approvals")
	}
}

func TestNeedsApproval(t *testing.T) {
	on, off := true, false
	destructive := []byte(`{"destructiveHint":true}`)
	unannotated := []byte(nil)
	for _, tc := range []struct {
		name        string
		top         bool
		servers     map[string]ServerPolicy
		tool        string
		annotations []byte
		want        bool
		wantCheck   bool // Check allows it
	}{
		{"approve glob", false, map[string]ServerPolicy{"m": {Approve: []string{"create_*"}}}, "create_entities", nil, true, true},
		{"not named", false, map[string]ServerPolicy{"m": {Approve: []string{"create_*"}}}, "read_graph", nil, false, true},
		{"star server", false, map[string]ServerPolicy{"*": {Approve: []string{"delete_*"}}}, "delete_x", nil, true, true},
		{"deny wins", false, map[string]ServerPolicy{"m": {Approve: []string{"*"}, Deny: []string{"delete_*"}}}, "delete_x", nil, true, false},
		{"approve beats allow", false, map[string]ServerPolicy{"m": {Allow: []string{"read_*"}, Approve: []string{"create_*"}}}, "create_x", nil, true, true},
		{"allow list still refuses", false, map[string]ServerPolicy{"m": {Allow: []string{"read_*"}, Approve: []string{"create_*"}}}, "drop_x", nil, false, false},
		{"destructive top", true, nil, "wipe", destructive, true, true},
		{"destructive off", false, nil, "wipe", destructive, false, true},
		{"unannotated never inferred", true, nil, "wipe", unannotated, false, true},
		{"explicit false", true, nil, "wipe", []byte(`{"destructiveHint":false}`), false, true},
		{"server overrides top", true, map[string]ServerPolicy{"m": {ApproveDestructive: &off}}, "wipe", destructive, false, true},
		{"server turns on", false, map[string]ServerPolicy{"m": {ApproveDestructive: &on}}, "wipe", destructive, true, true},
		{"star then server", false, map[string]ServerPolicy{"*": {ApproveDestructive: &on}, "m": {ApproveDestructive: &off}}, "wipe", destructive, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicy("bridge.policy", 0, tc.servers)
			if err != nil {
				t.Fatal(err)
			}
			p.ApproveDestructive = tc.top
			if got := p.NeedsApproval("m", tc.tool, tc.annotations) && p.Check("m", tc.tool) == nil; got != (tc.want && tc.wantCheck) {
				t.Errorf("gated = %v, want %v", got, tc.want && tc.wantCheck)
			}
			if got := p.Check("m", tc.tool) == nil; got != tc.wantCheck {
				t.Errorf("Check allows = %v, want %v", got, tc.wantCheck)
			}
		})
	}
	if _, err := NewPolicy("p", 0, map[string]ServerPolicy{"m": {Approve: []string{"[a]"}}}); err == nil || !strings.Contains(err.Error(), "approve") {
		t.Errorf("a bad approve pattern: %v, want an error naming approve", err)
	}
}

// TestApprovalMovesDeadline: the call's deadline moves by the time spent
// waiting for answers, and never comes while a form is open.
func TestApprovalMovesDeadline(t *testing.T) {
	a := newApprovals(&fakeHuman{})
	dl := time.Now().Add(-time.Second)
	if _, ok := a.moved(dl); ok {
		t.Error("a passed deadline moved without any wait")
	}
	a.waiting.Add(1)
	if _, ok := a.moved(dl); !ok {
		t.Error("the deadline came while a form was open")
	}
	a.waiting.Add(-1)
	a.paused.Add(int64(5 * time.Second))
	if d, ok := a.moved(dl); !ok || time.Until(d) < 3*time.Second {
		t.Errorf("moved = %v, %v: want ~4 s ahead", d, ok)
	}
}

// TestMCPHumanWithoutSession: a context that carries no MCP session (no
// client) cannot be asked: no capability, and Elicit fails.
func TestMCPHumanWithoutSession(t *testing.T) {
	h := NewMCPHuman(context.Background(), nil)
	if c := h.Caps(); c.Form || c.Missing == "" {
		t.Errorf("caps %+v: want none, with the reason", c)
	}
	if _, err := h.Elicit(context.Background(), approvalForm("s", "t", json.RawMessage(`{}`))); err == nil {
		t.Error("Elicit without a client succeeded")
	}
}

// TestApprovalLogBound: a loop of gated calls against a client that
// answers at once logs the first decisions of the call at info level and
// the rest at debug level only, never the arguments.
func TestApprovalLogBound(t *testing.T) {
	var calls atomic.Int64
	pol, err := NewPolicy("bridge.policy", 0, map[string]ServerPolicy{"fake": {Approve: []string{"create"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := gatedRouter(t, &calls, pol)
	var buf bytes.Buffer
	var mu sync.Mutex
	r.Log = zerolog.New(zerolog.SyncWriter(lockedWriter{&mu, &buf})).Level(zerolog.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := &activeCall{asks: newApprovals(&fakeHuman{caps: HumanCaps{Form: true}, answer: accept("deny")})}
	for range maxLoggedDecisions + 10 {
		_, _ = r.ServeSandbox(ctx, Scope{Servers: []string{"fake"}, human: a}, protocol.MethodCallTool,
			json.RawMessage(`{"server":"fake","tool":"create","arguments":{"name":"secret-value"}}`))
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Count(buf.String(), `"message":"approval"`); got != maxLoggedDecisions {
		t.Errorf("%d decisions logged at info, want %d", got, maxLoggedDecisions)
	}
	if got := a.asks.unlogged(); got != 10 {
		t.Errorf("unlogged = %d, want 10", got)
	}
	if strings.Contains(buf.String(), "secret-value") {
		t.Error("an argument value reached the log")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAliasCallSeesRealName: a call_tool that names its tool loosely
// (alias: true, as the proxies of a server signed in during the call send
// it) is checked by the policy, counted and gated under the tool's real
// name, so another spelling never slips past a rule.
func TestAliasCallSeesRealName(t *testing.T) {
	var calls atomic.Int64
	pol, err := NewPolicy("bridge.policy", 0, map[string]ServerPolicy{"fake": {Deny: []string{"create"}, Approve: []string{"wipe"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := gatedRouter(t, &calls, pol)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct{ tool, wantKind string }{
		{"CREATE", protocol.KindNotAvailable}, // denied by name
		{"Wipe", protocol.KindDenied},         // gated by name: this client cannot be asked
		{"READ", ""},
	} {
		h := &fakeHuman{caps: HumanCaps{Missing: noElicitation}}
		scope := Scope{Servers: []string{"fake"}, human: &activeCall{asks: newApprovals(h)}}
		before := calls.Load()
		_, err := r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(`{"server":"fake","tool":"`+tc.tool+`","arguments":{},"alias":true}`))
		if got := errKind(t, err); got != tc.wantKind {
			t.Errorf("%s: kind %q (%v), want %q", tc.tool, got, err, tc.wantKind)
		}
		if got, want := calls.Load()-before, int64(map[bool]int{true: 1}[tc.wantKind == ""]); got != want {
			t.Errorf("%s: %d calls reached the server, want %d", tc.tool, got, want)
		}
	}
}
