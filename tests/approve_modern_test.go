package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// modernMemoryBridge is memoryBridge for a client that negotiates protocol
// 2026-07-28 (server/discover; no initialize, no server→client requests):
// its human answers the bridge's input_required rounds through mcp-go's
// CallTool retry loop.
func modernMemoryBridge(t *testing.T, h *human, extra map[string]string) (*bridge, string) {
	t.Helper()
	mem := filepath.Join(t.TempDir(), "memory.jsonl")
	env := withServers(t, map[string]any{
		"memory": map[string]any{"command": npmBin(t, "mcp-server-memory"), "env": map[string]string{"MEMORY_FILE_PATH": mem}},
	}, extra)
	writeJSON(t, filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy"), map[string]any{
		"servers": map[string]any{"memory": map[string]any{"approve": []string{"create_*", "delete_*"}}},
	})
	b := startBridgeVersion(t, "", env, bridgeBin, []string{"run"}, "bridge-e2e-modern", "2026-07-28", client.WithElicitationHandler(h))
	if v := b.c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("the client negotiated %q, want 2026-07-28", v)
	}
	return b, mem
}

// heldCode counts its runs in the session before the gated call: a call
// held across the input_required round prints runs=1; a replay of the code
// after the answer would print runs=2.
func heldCode(name string) string {
	return "runs = globals().get('runs', 0) + 1\nglobals()['runs'] = runs\nprint('runs', runs)\n" + create(name)
}

// TestApprovalModernClient: with a client on protocol 2026-07-28 and the
// real memory server, a gated call's approval is an input_required round
// trip: the cell is held, live, until the client retries with the answer,
// and the same call goes on (its counter is 1, not 2); deny sends nothing
// upstream; run covers the rest of the call in one round.
func TestApprovalModernClient(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, decide("once", 0))
	b, mem := modernMemoryBridge(t, h, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "info"})

	got := b.mustOK(heldCode("ent_once"), "memory")
	if !strings.Contains(got, "runs 1\n") || !strings.Contains(got, "created") || !strings.Contains(got, "'ent_once'") {
		t.Fatalf("approved once over input_required: %s", got)
	}
	qs := h.questions()
	if len(qs) != 1 || !strings.Contains(qs[0].Params.Message, "memory.create_entities") || !strings.Contains(qs[0].Params.Message, "ent_once") {
		t.Fatalf("asked %d times: %+v", len(qs), qs)
	}
	schema, _ := json.Marshal(qs[0].Params.RequestedSchema)
	if !strings.Contains(string(schema), `"required":["decision"]`) {
		t.Errorf("form schema %s", schema)
	}

	h.set(decide("deny", 0))
	got = b.mustOK(heldCode("ent_deny"), "memory")
	if !strings.Contains(got, "runs 2\n") || !strings.Contains(got, "refused: denied") || strings.Contains(got, "'ent_deny'") {
		t.Errorf("denied over input_required: %s", got)
	}
	if data, _ := os.ReadFile(mem); strings.Contains(string(data), "ent_deny") {
		t.Errorf("the memory file holds a denied entity: %s", data)
	}

	h.set(decide("run", 0))
	got = b.mustOK(heldCode("ent_run1")+create("ent_run2"), "memory")
	if !strings.Contains(got, "runs 3\n") || strings.Count(got, "created") != 2 {
		t.Errorf("approved for the run: %s", got)
	}
	if n := len(h.questions()); n != 1 {
		t.Errorf("asked %d times for two gated calls after run, want 1", n)
	}
	if logs := b.stderr.String(); !strings.Contains(logs, `"decision":"once"`) || !strings.Contains(logs, `"decision":"deny"`) {
		t.Errorf("the decisions are not logged")
	}
}

// TestApprovalModernWire: on the wire, a 2026-07-28 tools/call that needs
// approval gets resultType input_required with the form and a requestState;
// a forged requestState, and the real one with other arguments, get a
// one-line error and resume nothing; the retry with the answer returns the
// same call's result.
func TestApprovalModernWire(t *testing.T) {
	requirePodman(t)
	env := withServers(t, map[string]any{"fake": fake()}, map[string]string{"MCP_BRIDGE_APPROVAL_TIMEOUT": "2"})
	writeJSON(t, filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy"), map[string]any{
		"servers": map[string]any{"fake": map[string]any{"approve": []string{"echo"}}},
	})
	cmd := exec.Command(bridgeBin, "run")
	cmd.Env = baseEnv(t, env)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	r := bufio.NewReader(stdout)
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "t", "version": "1"}}
	code := "n = globals().get('n', 0) + 1\nglobals()['n'] = n\ntry:\n    await mcp_fake.echo(text='x')\n    print('echoed', n)\nexcept MCPError as e:\n    print(e.kind, e)"
	args := map[string]any{"servers": []string{"fake"}, "timeout": 60, "code": code}
	id := 0
	send := func(args map[string]any, extra map[string]any) map[string]any {
		t.Helper()
		id++
		params := map[string]any{"_meta": meta, "name": "run_python", "arguments": args}
		for k, v := range extra {
			params[k] = v
		}
		data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
		if _, err := stdin.Write(append(data, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil || resp.Result == nil {
			t.Fatalf("reply %s: %v", line, err)
		}
		return resp.Result
	}
	res := send(args, nil)
	state, _ := res["requestState"].(string)
	reqs, _ := res["inputRequests"].(map[string]any)
	if res["resultType"] != "input_required" || len(state) < 43 || len(reqs) != 1 {
		t.Fatalf("first reply: %v", res)
	}
	var key string
	for k := range reqs {
		key = k
	}
	form, _ := json.Marshal(reqs[key])
	if !strings.Contains(string(form), `"method":"elicitation/create"`) || !strings.Contains(string(form), "fake.echo") {
		t.Errorf("input request %s", form)
	}
	answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}}

	other := map[string]any{"servers": []string{"fake"}, "timeout": 60, "code": "print('other')"}
	for _, tc := range []struct {
		name  string
		args  map[string]any
		state string
		want  string
	}{
		{"forged", args, "AAAA" + state[4:], "requestState is unknown"},
		{"other arguments", other, state, "another run_python call"},
	} {
		got := send(tc.args, map[string]any{"requestState": tc.state, "inputResponses": answer})
		txt, _ := json.Marshal(got["content"])
		if got["isError"] != true || !strings.Contains(string(txt), tc.want) {
			t.Errorf("%s: %s, want an error with %q", tc.name, txt, tc.want)
		}
	}
	res = send(args, map[string]any{"requestState": state, "inputResponses": answer})
	txt, _ := json.Marshal(res["content"])
	if res["isError"] == true || !strings.Contains(string(txt), "echoed 1") {
		t.Errorf("the retry: %v (want the held call's output, echoed 1)", res)
	}
	res = send(args, map[string]any{"requestState": state, "inputResponses": answer})
	if txt, _ := json.Marshal(res["content"]); !strings.Contains(string(txt), "already used") {
		t.Errorf("a reused requestState: %s", txt)
	}

	// No retry within MCP_BRIDGE_APPROVAL_TIMEOUT: the handle expires, the
	// held call is interrupted: the session answers its next call at once.
	res = send(args, nil)
	state, _ = res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("second call: %v", res)
	}
	time.Sleep(3 * time.Second)
	res = send(args, map[string]any{"requestState": state, "inputResponses": answer})
	if txt, _ := json.Marshal(res["content"]); !strings.Contains(string(txt), "requestState expired") || !strings.Contains(string(txt), "2s (MCP_BRIDGE_APPROVAL_TIMEOUT)") {
		t.Errorf("a late retry: %s", txt)
	}
	start := time.Now()
	res = send(map[string]any{"timeout": 20, "code": "print('n is', n)"}, nil)
	if txt, _ := json.Marshal(res["content"]); res["isError"] == true || !strings.Contains(string(txt), "n is 2") || time.Since(start) > 10*time.Second {
		t.Errorf("the session after an expired round (%s): %s", time.Since(start), txt)
	}
}

// TestElicitationRelayModern: with a 2026-07-28 client, the capabilities
// of its server/discover are declared to the real everything server, and
// that server's elicitation/create, sent while the inner call runs, reaches
// the client as an input_required round of the run_python call; the answer
// goes back upstream and the same call returns the server's result. Its
// sampling request takes the same way.
func TestElicitationRelayModern(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "Ada Lovelace"}}}, nil
	})
	b := startBridgeVersion(t, "", everythingEnv(t, t.TempDir()), bridgeBin, []string{"run"}, "bridge-e2e-modern", "2026-07-28",
		client.WithElicitationHandler(h), client.WithSamplingHandler(sampler{}))
	if v := b.c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("the client negotiated %q, want 2026-07-28", v)
	}
	if got := b.mustOK("print(hasattr(mcp_everything, 'trigger_elicitation_request'))", "everything"); !strings.Contains(got, "True") {
		t.Fatalf("the everything server did not list its elicitation tool to a 2026-07-28 client's bridge: %s", got)
	}
	got := b.mustOK("runs = globals().get('runs', 0) + 1\nglobals()['runs'] = runs\nprint('runs', runs)\nprint(await mcp_everything.trigger_elicitation_request())", "everything")
	if !strings.Contains(got, "runs 1\n") || !strings.Contains(got, "Name: Ada Lovelace") {
		t.Errorf("relayed elicitation over input_required: %s", got)
	}
	qs := h.questions()
	if len(qs) != 1 || !strings.HasPrefix(qs[0].Params.Message, "everything.trigger-elicitation-request asks: ") {
		t.Errorf("asked %d times: %+v", len(qs), qs)
	}
	got = b.mustOK("print(await mcp_everything.trigger_sampling_request(prompt='hi', maxTokens=5))", "everything")
	if !strings.Contains(got, "sampled reply") || !strings.Contains(got, "test-model-7") {
		t.Errorf("relayed sampling over input_required: %s", got)
	}
}
