package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// sampler is the test client's sampling handler: a fixed reply.
type sampler struct{}

func (sampler) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled reply")},
		Model:           "test-model-7", StopReason: "endTurn",
	}, nil
}

// everythingEnv configures the real everything server and the fake one,
// with a state dir the test chooses (the disk catalog lives there).
func everythingEnv(t *testing.T, state string) map[string]string {
	return withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"fake":       fake("--ask"),
	}, map[string]string{"MCP_BRIDGE_STATE_DIR": state})
}

const hasAskers = "print(hasattr(mcp_everything, 'trigger_elicitation_request'), hasattr(mcp_everything, 'trigger_sampling_request'))"

// TestElicitationRelay: with a client that declares elicitation and
// sampling, the bridge declares them to the real everything server, which
// then lists its elicitation and sampling tools; their questions reach the
// client, named by server and tool, the form as the server sent it, and
// the answers go back. A question asked while two calls to the server are
// in flight cannot be tied to one and is declined, with a note. The disk
// catalog is kept per declared capability set.
func TestElicitationRelay(t *testing.T) {
	requirePodman(t)
	state := t.TempDir()

	// A client that declares nothing first: its catalog must not serve the
	// next bridge, whose client declares more.
	plain := startBridge(t, everythingEnv(t, state))
	if got := plain.mustOK(hasAskers, "everything"); !strings.Contains(got, "False False") {
		t.Fatalf("without the capabilities the everything server listed its elicitation or sampling tool: %s", got)
	}
	plain.Close()

	h := newHuman(t, func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "Ada Lovelace"}}}, nil
	})
	b := startBridgeDir(t, "", everythingEnv(t, state), bridgeBin, []string{"run"}, "bridge-e2e",
		client.WithElicitationHandler(h), client.WithSamplingHandler(sampler{}))
	if got := b.mustOK(hasAskers, "everything"); !strings.Contains(got, "True True") {
		t.Fatalf("with the capabilities the everything server did not list both tools: %s", got)
	}
	entries, _ := os.ReadDir(filepath.Join(state, ".bridge", "catalog"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) < 3 { // fake, and everything under two capability sets
		t.Errorf("disk catalog %v: want one entry per declared capability set", names)
	}

	got := b.mustOK("print(await mcp_everything.trigger_elicitation_request())", "everything")
	if !strings.Contains(got, "Name: Ada Lovelace") {
		t.Errorf("relayed elicitation: %s", got)
	}
	qs := h.questions()
	if len(qs) != 1 {
		t.Fatalf("the client was asked %d times, want 1", len(qs))
	}
	if msg := qs[0].Params.Message; !strings.HasPrefix(msg, "everything.trigger-elicitation-request asks: Please provide inputs") {
		t.Errorf("relayed message %q: want it to name the server and tool", msg)
	}
	schema, _ := json.Marshal(qs[0].Params.RequestedSchema)
	if !strings.Contains(string(schema), "It was a dark and stormy night.") {
		t.Errorf("relayed schema %s: want the server's form as it was", schema)
	}

	got = b.mustOK("print(await mcp_everything.trigger_sampling_request(prompt='hi', maxTokens=5))", "everything")
	if !strings.Contains(got, "sampled reply") || !strings.Contains(got, "test-model-7") {
		t.Errorf("relayed sampling: %s", got)
	}

	// Two calls in flight on the same connection: the question is declined.
	h.set(h.answer)
	r := b.call(map[string]any{"code": `import asyncio
slow = asyncio.create_task(mcp_everything.trigger_long_running_operation(duration=3, steps=3))
await asyncio.sleep(0.5)
print(await mcp_everything.trigger_elicitation_request())
await slow`, "servers": []string{"everything"}, "timeout": 60})
	got = text(t, r)
	if !strings.Contains(got, "declined") || !strings.Contains(got, "could not tell which call") {
		t.Errorf("a question with two calls in flight: %s", got)
	}
	if n := len(h.questions()); n != 0 {
		t.Errorf("the client was asked %d times with two calls in flight, want 0", n)
	}
}

// TestElicitationRelayUndeclared: a client that declares nothing gets
// nothing declared upstream; a server that asks anyway gets -32601, and
// the result says so.
func TestElicitationRelayUndeclared(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, everythingEnv(t, t.TempDir()))
	r := b.call(map[string]any{"code": "print(await mcp_fake.ask())", "servers": []string{"fake"}, "timeout": 60})
	got := text(t, r)
	if !strings.Contains(got, "error") || !strings.Contains(got, "did not declare") || !strings.Contains(got, "-32601") {
		t.Errorf("an undeclared elicitation: %s", got)
	}
}

// TestElicitationRelayTimeBound: a relayed question the human leaves
// unanswered ends with MCP_BRIDGE_APPROVAL_TIMEOUT: the server gets a
// decline, and the cell goes on.
func TestElicitationRelayTimeBound(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, decide("once", 5*time.Second))
	env := everythingEnv(t, t.TempDir())
	env["MCP_BRIDGE_APPROVAL_TIMEOUT"] = "1"
	b := startBridgeDir(t, "", env, bridgeBin, []string{"run"}, "bridge-e2e", client.WithElicitationHandler(h))
	start := time.Now()
	got := b.mustOK("print(await mcp_fake.ask())", "fake")
	if !strings.Contains(got, "action decline") {
		t.Errorf("an unanswered relayed question: %s", got)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the relay took %s, want about 1 s (MCP_BRIDGE_APPROVAL_TIMEOUT)", d)
	}
}

// TestElicitationRelayTask: the real everything server's task-required
// research tool asks for clarification while its task is input_required;
// the question names its task (related-task), so it reaches the client
// even with another call to the server in flight, and the answer shapes
// the task's result.
func TestElicitationRelayTask(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, func(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"interpretation": "snake"}}}, nil
	})
	b := startBridgeDir(t, "", everythingEnv(t, t.TempDir()), bridgeBin, []string{"run"}, "bridge-e2e", client.WithElicitationHandler(h))
	r := b.call(map[string]any{"code": `import asyncio
other = asyncio.create_task(mcp_everything.trigger_long_running_operation(duration=12, steps=6))
r = await mcp_everything.simulate_research_query(topic='python', ambiguous=True)
print(r)
await other`, "servers": []string{"everything"}, "timeout": 90})
	got := text(t, r)
	if r.IsError || !strings.Contains(got, "**Clarification**: snake") {
		t.Errorf("a task's question with another call in flight: %s", got)
	}
	qs := h.questions()
	if len(qs) != 1 || !strings.HasPrefix(qs[0].Params.Message, "everything.simulate-research-query asks: ") {
		t.Errorf("questions %+v: want one, naming the server and tool", qs)
	}
}

// TestElicitationRelayURL: URL mode is declared upstream only when the
// client declared it; the everything server then lists its URL tool, and
// the URL request reaches the client in URL mode, its URL intact.
func TestElicitationRelayURL(t *testing.T) {
	requirePodman(t)
	h := newHuman(t, func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
	})
	b := startBridgeDir(t, "", everythingEnv(t, t.TempDir()), bridgeBin, []string{"run"}, "bridge-e2e", client.WithElicitationHandler(h),
		client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}))
	got := b.mustOK("print(await mcp_everything.trigger_url_elicitation(url='https://example.com/consent'))", "everything")
	qs := h.questions()
	if len(qs) != 1 || qs[0].Params.Mode != mcp.ElicitationModeURL || qs[0].Params.URL != "https://example.com/consent" {
		t.Fatalf("questions %+v (result %s): want one URL-mode request with the URL intact", qs, got)
	}
	if !strings.HasPrefix(qs[0].Params.Message, "everything.trigger-url-elicitation asks: ") {
		t.Errorf("message %q: want the server and tool named", qs[0].Params.Message)
	}

	// A client that declared form mode only: the URL tool is not listed.
	form := startBridgeDir(t, "", everythingEnv(t, t.TempDir()), bridgeBin, []string{"run"}, "bridge-e2e", client.WithElicitationHandler(h))
	if got := form.mustOK("print(hasattr(mcp_everything, 'trigger_url_elicitation'))", "everything"); !strings.Contains(got, "False") {
		t.Errorf("form-only client: the URL tool is listed: %s", got)
	}
}
