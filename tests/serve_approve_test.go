package tests

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
)

// TestServeApprovalsReachCaller: with the real memory server behind an
// approval policy, each principal's gated call asks that principal's own
// HTTP client, never the other one, also when both calls run at once.
func TestServeApprovalsReachCaller(t *testing.T) {
	s := serveMemoryApproved(t)
	aliceHuman, bobHuman := newHuman(t, decide("once", 0)), newHuman(t, decide("deny", 0))
	connect := func(tok string, h *human) *client.Client {
		c, err := s.clientVersion(tok, "2025-11-25", client.WithElicitationHandler(h))
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	alice, bob := connect(aliceToken, aliceHuman), connect(bobToken, bobHuman)
	run := func(c *client.Client, name string) string {
		r := callHTTP(t, c, map[string]any{"code": create(name), "servers": []string{"memory"}})
		return text(t, r)
	}
	if got := run(alice, "ent_alice"); !strings.Contains(got, "created") {
		t.Fatalf("alice's approved call: %s", got)
	}
	if got := run(bob, "ent_bob"); !strings.Contains(got, "refused: denied") {
		t.Fatalf("bob's denied call: %s", got)
	}
	if a, b := len(aliceHuman.questions()), len(bobHuman.questions()); a != 1 || b != 1 {
		t.Fatalf("questions: alice %d, bob %d, want 1 each", a, b)
	}
	for _, q := range bobHuman.questions() {
		if strings.Contains(q.Params.Message, "ent_alice") {
			t.Errorf("bob was asked about alice's call: %s", q.Params.Message)
		}
	}
	// Both at once: each answer still comes from the caller's own client.
	aliceHuman.set(decide("once", 0))
	bobHuman.set(decide("deny", 0))
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i, c := range []*client.Client{alice, bob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = run(c, []string{"ent_a2", "ent_b2"}[i])
		}()
	}
	wg.Wait()
	if !strings.Contains(got[0], "created") || !strings.Contains(got[1], "refused: denied") {
		t.Errorf("concurrent: alice %q, bob %q", got[0], got[1])
	}
	if a, b := len(aliceHuman.questions()), len(bobHuman.questions()); a != 1 || b != 1 {
		t.Errorf("concurrent questions: alice %d, bob %d, want 1 each", a, b)
	}
	for _, q := range aliceHuman.questions() {
		if !strings.Contains(q.Params.Message, "ent_a2") {
			t.Errorf("alice was asked: %s", q.Params.Message)
		}
	}
	for _, q := range bobHuman.questions() {
		if !strings.Contains(q.Params.Message, "ent_b2") {
			t.Errorf("bob was asked: %s", q.Params.Message)
		}
	}
	// The audit trail has each decision in the record of the call that
	// asked, with the client that decided.
	out, errOut, code := runCLI(t, s.auditEnv, "", "audit", "show", "--json")
	if code != 0 {
		t.Fatalf("audit show: exit %d: %s", code, errOut)
	}
	decisions := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Principal string
			Approvals []struct{ Server, Tool, Decision, Decider string }
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit record %q: %v", line, err)
		}
		for _, a := range r.Approvals {
			if a.Server != "memory" || a.Tool != "create_entities" || a.Decider != "bridge-e2e-http" {
				t.Errorf("%s's approval record: %+v", r.Principal, a)
			}
			decisions[r.Principal] = append(decisions[r.Principal], a.Decision)
		}
	}
	if got, want := fmt.Sprint(decisions), "map[alice:[once once] bob:[deny deny]]"; got != want {
		t.Errorf("approvals in the audit trail: %s, want %s", got, want)
	}
}

// serveMemoryApproved serves principals alice and bob with the real memory
// server behind a policy that gates its create_* tools.
func serveMemoryApproved(t *testing.T) *served {
	t.Helper()
	mem := filepath.Join(t.TempDir(), "memory.jsonl")
	env := withServers(t, map[string]any{
		"memory": map[string]any{"command": npmBin(t, "mcp-server-memory"), "env": map[string]string{"MEMORY_FILE_PATH": mem}},
	}, nil)
	writeJSON(t, filepath.Join(env["MCP_BRIDGE_CONFIG_DIR"], "bridge.policy"), map[string]any{
		"servers": map[string]any{"memory": map[string]any{"approve": []string{"create_*"}}},
	})
	env["MCP_BRIDGE_TOKENS_FILE"] = writeTokens(t, "alice "+aliceToken, "bob "+bobToken)
	env["MCP_BRIDGE_STATE_DIR"], env["MCP_BRIDGE_KEY_FILE"] = t.TempDir(), filepath.Join(t.TempDir(), "key")
	s := startServe(t, env)
	s.auditEnv = map[string]string{"MCP_BRIDGE_STATE_DIR": env["MCP_BRIDGE_STATE_DIR"], "MCP_BRIDGE_KEY_FILE": env["MCP_BRIDGE_KEY_FILE"]}
	return s
}
