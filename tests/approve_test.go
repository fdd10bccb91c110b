package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// human is the test's MCP client's elicitation handler: it answers every
// form with answer(req) and records what it was asked. Its answers stop
// waiting when the test ends (life): mcp-go's client gives its handler a
// context that never ends.
type human struct {
	life   context.Context
	mu     sync.Mutex
	asked  []mcp.ElicitationRequest
	answer func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
}

// newHuman returns a human answering with answer until the test ends.
func newHuman(t *testing.T, answer func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)) *human {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &human{life: ctx, answer: answer}
}

func (h *human) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	ctx := h.life
	h.mu.Lock()
	h.asked = append(h.asked, req)
	answer := h.answer
	h.mu.Unlock()
	return answer(ctx, req)
}

func (h *human) set(answer func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer = answer
	h.asked = nil
}

func (h *human) questions() []mcp.ElicitationRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]mcp.ElicitationRequest(nil), h.asked...)
}

// decide answers approval forms with decision after delay (unless the
// client's transport ends first).
func decide(decision string, delay time.Duration) func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if err := pause(ctx, delay); err != nil {
			return nil, err
		}
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"decision": decision}}}, nil
	}
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func respond(action mcp.ElicitationResponseAction) func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action}}, nil
	}
}

// memoryBridge starts a bridge with the real memory server under a policy
// that gates its create_* and delete_* tools; h (nil: none) answers the
// client's elicitations. It returns the memory server's data file.
func memoryBridge(t *testing.T, h *human, extra map[string]string) (*bridge, string) {
	t.Helper()
	mem := filepath.Join(t.TempDir(), "memory.jsonl")
	env := withServers(t, map[string]any{
		"memory": map[string]any{"command": npmBin(t, "mcp-server-memory"), "env": map[string]string{"MEMORY_FILE_PATH": mem}},
	}, extra)
	writeJSON(t, filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy"), map[string]any{
		"servers": map[string]any{"memory": map[string]any{"approve": []string{"create_*", "delete_*"}}},
	})
	var opts []client.ClientOption
	if h != nil {
		opts = append(opts, client.WithElicitationHandler(h))
	}
	return startBridgeDir(t, "", env, bridgeBin, []string{"run"}, "bridge-e2e", opts...), mem
}

const createCode = `
try:
    await mcp_memory.create_entities(entities=[{"name": %q, "entityType": "t", "observations": ["secret-observation"]}])
    print("created")
except MCPError as e:
    print("refused:", e.kind, e)
g = await mcp_memory.read_graph()
print("names:", sorted(x["name"] for x in g["entities"]))
`

func create(name string) string { return strings.Replace(createCode, "%q", `"`+name+`"`, 1) }

// TestApprovalMemory: with the real memory server and a client that
// answers elicitation, a gated call goes upstream only on once or run; on
// deny, decline, cancel or no answer in time it raises MCPError (kind
// denied) and the entity it would have created does not exist. The form
// names server.tool with an argument preview; the log has every decision
// but never the arguments.
func TestApprovalMemory(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, nil)
	b, mem := memoryBridge(t, h, map[string]string{"MCP_BRIDGE_APPROVAL_TIMEOUT": "2", "MCP_BRIDGE_LOG_LEVEL": "info"})

	for _, tc := range []struct {
		name   string
		answer func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
		want   string
	}{
		{"deny", decide("deny", 0), "refused: denied"},
		{"decline", respond(mcp.ElicitationResponseActionDecline), "refused: denied"},
		{"cancel", respond(mcp.ElicitationResponseActionCancel), "refused: denied"},
		{"timeout", decide("once", 4*time.Second), "no answer within 2s (MCP_BRIDGE_APPROVAL_TIMEOUT)"},
	} {
		h.set(tc.answer)
		got := b.mustOK(create("ent_"+tc.name), "memory")
		if !strings.Contains(got, tc.want) || strings.Contains(got, "ent_"+tc.name+"'") {
			t.Errorf("%s: %s\nwant %q and no entity", tc.name, got, tc.want)
		}
		if !strings.Contains(got, "names: []") {
			t.Errorf("%s: the graph is not empty after a refused create: %s", tc.name, got)
		}
	}
	// The gate is on every path upstream: runtime.call_tool, and a saved
	// tool (loaded fresh after a reset) that calls the proxy.
	h.set(decide("deny", 0))
	b.mustOK("async def make_entity(name):\n    return await mcp_memory.create_entities(entities=[{'name': name, 'entityType': 't', 'observations': []}])\nsave_tool(make_entity)\nruntime.reset()", "memory")
	for name, code := range map[string]string{
		"call_tool":  "await runtime.call_tool('memory', 'create_entities', {'entities': [{'name': 'ent_raw', 'entityType': 't', 'observations': []}]})",
		"saved tool": "await make_entity('ent_saved')",
	} {
		got := b.mustOK("try:\n    "+code+"\n    print('created')\nexcept MCPError as e:\n    print('refused:', e.kind)", "memory")
		// The first cell after the reset also notes the saved tool it loaded.
		if !strings.HasPrefix(got, "refused: denied") || strings.Contains(got, "created") {
			t.Errorf("%s under deny: %q, want refused: denied", name, got)
		}
	}
	if got := b.mustOK("print(sorted(x['name'] for x in (await mcp_memory.read_graph())['entities']))", "memory"); got != "[]" {
		t.Errorf("entities after the denied calls: %s, want none", got)
	}
	if data, _ := os.ReadFile(mem); strings.Contains(string(data), "ent_") {
		t.Errorf("the memory file holds a refused entity: %s", data)
	}

	h.set(decide("once", 0))
	got := b.mustOK(create("ent_once"), "memory")
	if !strings.Contains(got, "created") || !strings.Contains(got, "'ent_once'") {
		t.Fatalf("approved once: %s", got)
	}
	qs := h.questions()
	if len(qs) != 1 {
		t.Fatalf("asked %d times for one gated call, want 1", len(qs))
	}
	msg := qs[0].Params.Message
	if !strings.Contains(msg, "memory.create_entities") || !strings.Contains(msg, "ent_once") {
		t.Errorf("form message %q: want server.tool and the argument preview", msg)
	}
	schema, _ := json.Marshal(qs[0].Params.RequestedSchema)
	if !strings.Contains(string(schema), `"required":["decision"]`) || !strings.Contains(string(schema), `"enum":["once","run","deny"]`) {
		t.Errorf("form schema %s: want one required decision field, once/run/deny", schema)
	}

	// run: the same server.tool for the rest of the call, asked once; a
	// later call asks again.
	h.set(decide("run", 0))
	got = b.mustOK(create("ent_run1")+create("ent_run2"), "memory")
	if strings.Count(got, "created") != 2 {
		t.Fatalf("approved for the run: %s", got)
	}
	if n := len(h.questions()); n != 1 {
		t.Errorf("asked %d times for two calls after a run answer, want 1", n)
	}
	h.set(decide("deny", 0))
	if got := b.mustOK(create("ent_after"), "memory"); !strings.Contains(got, "refused: denied") {
		t.Errorf("a run grant outlived its call: %s", got)
	}

	// Every decision is logged at info, never an argument value.
	logs := b.stderr.String()
	for _, d := range []string{`"decision":"deny"`, `"decision":"decline"`, `"decision":"cancel"`, `"decision":"timeout"`, `"decision":"once"`, `"decision":"run"`} {
		if !strings.Contains(logs, d) {
			t.Errorf("the log has no %s", d)
		}
	}
	if strings.Contains(logs, "secret-observation") {
		t.Errorf("an argument value reached the log")
	}
}

// TestApprovalNotCellTime: the wait for a human's answer does not count
// against the cell's timeout.
func TestApprovalNotCellTime(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, decide("once", 4*time.Second))
	b, _ := memoryBridge(t, h, nil)
	b.mustOK("await mcp_memory.read_graph()", "memory") // warm: the server is up
	r := b.call(map[string]any{"code": create("slow_ok"), "servers": []string{"memory"}, "timeout": 3})
	if got := text(t, r); r.IsError || !strings.Contains(got, "created") {
		t.Errorf("a 4 s approval in a 3 s cell: %s", got)
	}
}

// TestApprovalJob: a job's gated call made while no call is active waits
// for the call that collects the job, and its client is asked.
func TestApprovalJob(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, decide("once", 0))
	b, _ := memoryBridge(t, h, nil)
	code := `job = runtime.start("import asyncio\nawait asyncio.sleep(3)\nawait mcp_memory.create_entities(entities=[{'name': 'from_job', 'entityType': 't', 'observations': []}])\n'job done'")`
	b.mustOK(code, "memory")
	if n := len(h.questions()); n != 0 {
		t.Fatalf("asked %d times before the job's call", n)
	}
	time.Sleep(5 * time.Second) // the job's gated call now waits, no call active
	got := b.mustOK("print(runtime.result(job, wait=30))\ng = await mcp_memory.read_graph()\nprint(sorted(x['name'] for x in g['entities']))", "memory")
	if !strings.Contains(got, "job done") || !strings.Contains(got, "from_job") {
		t.Errorf("collecting the job: %s", got)
	}
	if n := len(h.questions()); n != 1 {
		t.Errorf("asked %d times, want once (in the collecting call)", n)
	}
}

// TestApprovalWithoutElicitation: a client that declares nothing gets a
// gated call refused (fail closed) with the fix named, and nothing is sent.
func TestApprovalWithoutElicitation(t *testing.T) {
	requirePodman(t)
	b, mem := memoryBridge(t, nil, nil)
	got := b.mustOK(create("ent_x"), "memory")
	if !strings.Contains(got, "refused: denied") || !strings.Contains(got, "did not declare elicitation") ||
		!strings.Contains(got, "(gated by approve in servers.memory of ") || !strings.Contains(got, "take the tool out of that approve list (allow does not lift it)") ||
		!strings.Contains(got, "names: []") {
		t.Errorf("without elicitation: %s", got)
	}
	if data, _ := os.ReadFile(mem); strings.Contains(string(data), "ent_x") {
		t.Errorf("the memory file holds the refused entity: %s", data)
	}
}
