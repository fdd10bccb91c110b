package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
)

// TestServeApprovalModern: under bridge serve, a 2026-07-28 HTTP client's
// gated call is approved through an input_required round and the held call
// goes on (runs 1); another principal presenting the requestState gets the
// "unknown" error and resumes nothing, and the owner's retry still works.
func TestServeApprovalModern(t *testing.T) {
	s := serveMemoryApproved(t)

	h := newHuman(t, decide("once", 0))
	c, err := s.clientVersion(aliceToken, "2026-07-28", client.WithElicitationHandler(h))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if v := c.ProtocolVersion(); v != "2026-07-28" {
		t.Fatalf("the HTTP client negotiated %q, want 2026-07-28", v)
	}
	got := text(t, callHTTP(t, c, map[string]any{"code": heldCode("ent_http"), "servers": []string{"memory"}}))
	if !strings.Contains(got, "runs 1\n") || !strings.Contains(got, "created") || len(h.questions()) != 1 {
		t.Fatalf("approved over HTTP input_required (asked %d times): %s", len(h.questions()), got)
	}

	// Raw requests: alice gets the round, bob presents her requestState.
	args := map[string]any{"code": heldCode("ent_raw"), "servers": []string{"memory"}, "session": "raw"}
	post := func(tok string, extra map[string]any) map[string]any {
		t.Helper()
		params := map[string]any{"name": "run_python", "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"}}}
		for k, v := range extra {
			params[k] = v
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		headers := withHeader(withHeader(withHeader(bearerHeader(tok), "Mcp-Protocol-Version", "2026-07-28"),
			"Mcp-Method", "tools/call"), "Mcp-Name", "run_python")
		status, _, out := s.raw("POST", "/mcp", string(body), headers)
		if i := strings.Index(out, "data: "); i >= 0 && !strings.HasPrefix(out, "{") {
			out = strings.SplitN(out[i+len("data: "):], "\n", 2)[0]
		}
		var resp struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Result == nil {
			t.Fatalf("status %d, reply %s: %v", status, out, err)
		}
		return resp.Result
	}
	res := post(aliceToken, nil)
	state, _ := res["requestState"].(string)
	reqs, _ := res["inputRequests"].(map[string]any)
	if res["resultType"] != "input_required" || state == "" || len(reqs) != 1 {
		t.Fatalf("alice's raw call: %v", res)
	}
	answer := map[string]any{}
	for k := range reqs {
		answer[k] = map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}
	}
	res = post(bobToken, map[string]any{"requestState": state, "inputResponses": answer})
	if txt, _ := json.Marshal(res["content"]); res["isError"] != true || !strings.Contains(string(txt), "requestState is unknown") {
		t.Errorf("bob presenting alice's requestState: %s", txt)
	}
	res = post(aliceToken, map[string]any{"requestState": state, "inputResponses": answer})
	if txt, _ := json.Marshal(res["content"]); res["isError"] == true || !strings.Contains(string(txt), "runs 1") || !strings.Contains(string(txt), "created") {
		t.Errorf("alice's retry after bob's attempt: %s", txt)
	}
}
