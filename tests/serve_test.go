package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

const (
	aliceToken = "tok-alice-4f1b9c2e"
	bobToken   = "tok-bob-77d0a3e5"
)

// TestServeTeam runs one `bridge serve` with two principals, each with a
// real mcp-go streamable HTTP client, against real containers.
func TestServeTeam(t *testing.T) {
	tokens := writeTokens(t, "# the team", "alice "+aliceToken, "bob "+bobToken)
	s := startServe(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens, "MCP_BRIDGE_MAX_FRAME_BYTES": "1048576"})
	alice, bob := s.mustClient(aliceToken), s.mustClient(bobToken)

	t.Run("isolation", func(t *testing.T) {
		r := callHTTP(t, alice, map[string]any{"code": "secret = 'alice-only'\nsave_memory('k', 'alice-value')\n" +
			"def alice_tool(x=1):\n    return x + 41\n_ = save_tool(alice_tool)\nprint('saved')"})
		if got := text(t, r); r.IsError || !strings.Contains(got, "saved") {
			t.Fatalf("alice's setup: %q", got)
		}
		// bob's "default" session is his own: same name, other principal.
		code := "print(globals().get('secret'), load_memory('k'), len(list_memories()))\n" +
			"try:\n    from user_tools import alice_tool\n    print('tool leaked')\nexcept ImportError:\n    print('no tool')"
		r = callHTTP(t, bob, map[string]any{"code": code})
		if got := text(t, r); r.IsError || got != "None None 0\nno tool" {
			t.Fatalf("bob sees: %q (isError %v), want %q", got, r.IsError, "None None 0\nno tool")
		}
		// alice, reconnecting with a new MCP session, finds her session,
		// memory and saved tool again.
		again := s.mustClient(aliceToken)
		r = callHTTP(t, again, map[string]any{"code": "print(secret, load_memory('k'))"})
		if got := text(t, r); r.IsError || got != "alice-only alice-value" {
			t.Fatalf("alice again: %q", got)
		}
		r = callHTTP(t, again, map[string]any{"session": "fresh", "code": "from user_tools import alice_tool\nprint(alice_tool())"})
		if got := text(t, r); r.IsError || !strings.HasPrefix(got, "42\n") {
			t.Fatalf("alice's saved tool in a new session: %q", got)
		}
	})

	t.Run("stateless revision", func(t *testing.T) {
		// mcp-go's client tries 2026-07-28 first: no MCP session, every
		// request carries its own token, and the principal's sessions are
		// the same ones.
		c, err := s.clientVersion(bobToken, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := c.ProtocolVersion(); got != "2026-07-28" {
			t.Errorf("negotiated %q, want 2026-07-28", got)
		}
		r := callHTTP(t, c, map[string]any{"code": "print(globals().get('secret'), load_memory('k'))"})
		if got := text(t, r); r.IsError || got != "None None" {
			t.Fatalf("bob over 2026-07-28: %q", got)
		}
		c2, err := s.clientVersion(aliceToken, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		r = callHTTP(t, c2, map[string]any{"code": "print(secret)"})
		if got := text(t, r); r.IsError || got != "alice-only" {
			t.Fatalf("alice over 2026-07-28: %q", got)
		}
	})

	t.Run("auth", func(t *testing.T) {
		if _, err := s.client("tok-wrong"); err == nil {
			t.Fatal("a client with a wrong token initialized")
		}
		if _, err := s.client(""); err == nil {
			t.Fatal("a client without a token initialized")
		}
		code, h, body := s.raw("POST", "/mcp", initializeBody, nil)
		if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("no token: %d %q %s", code, h.Get("WWW-Authenticate"), body)
		}
		code, _, _ = s.raw("POST", "/mcp", initializeBody, bearerHeader(aliceToken+"x"))
		if code != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d, want 401", code)
		}
		if code, _, _ := s.raw("GET", "/.well-known/oauth-protected-resource", "", nil); code != http.StatusNotFound {
			t.Errorf("oauth metadata: %d, want 404", code)
		}
		// alice's MCP session id is hers: bob's token with it gets 404.
		code, h, _ = s.raw("POST", "/mcp", initializeBody, bearerHeader(aliceToken))
		sid := h.Get("Mcp-Session-Id")
		if code != 200 || sid == "" {
			t.Fatalf("alice's initialize: %d, session %q", code, sid)
		}
		hdr := withHeader(bearerHeader(bobToken), "Mcp-Session-Id", sid)
		hdr["MCP-Protocol-Version"] = "2025-11-25"
		code, _, body = s.raw("POST", "/mcp", fmtCall(2, "print(secret)"), hdr)
		if code != http.StatusNotFound || strings.Contains(body, "alice-only") {
			t.Fatalf("bob with alice's session id: %d %s, want 404", code, body)
		}
		if strings.Contains(s.stderr.String(), aliceToken) || strings.Contains(s.stderr.String(), bobToken) {
			t.Error("a token was logged")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		auth := bearerHeader(aliceToken)
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"` +
			strings.Repeat("x", 1200<<10) + `"}}}`
		if code, _, body := s.raw("POST", "/mcp", big, auth); code != http.StatusRequestEntityTooLarge {
			t.Errorf("body over the cap: %d %.200s, want 413", code, body)
		}
		if code, _, _ := s.raw("POST", "/mcp", initializeBody, withHeader(auth, "Origin", "https://evil.example.com")); code != http.StatusForbidden {
			t.Errorf("foreign Origin: %d, want 403", code)
		}
		if code, _, _ := s.raw("POST", "/mcp", initializeBody, withHeader(auth, "Origin", "http://localhost:5173")); code != 200 {
			t.Errorf("loopback Origin: %d, want 200", code)
		}
		if code, _, body := s.raw("POST", "/mcp", `{"jsonrpc": "2.0", "id": 1, "method":`, auth); code/100 != 4 || !strings.Contains(body, `"error"`) {
			t.Errorf("malformed JSON: %d %s, want a 4xx JSON-RPC error", code, body)
		}
		hdr := withHeader(auth, "Mcp-Session-Id", "no-such-session")
		if code, _, body := s.raw("POST", "/mcp", fmtCall(3, "1"), hdr); code != http.StatusNotFound || !strings.Contains(body, "unknown MCP session id") {
			t.Errorf("unknown session: %d %s, want 404 unknown MCP session id", code, body)
		}
		// The bridge stays up.
		if r := callHTTP(t, alice, map[string]any{"code": "print(6 * 7)"}); text(t, r) != "42" {
			t.Errorf("after the bad input: %q", text(t, r))
		}
	})

	t.Run("observability", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz"} {
			if code, _, body := s.raw("GET", p, "", nil); code != 200 {
				t.Errorf("%s: %d %s", p, code, body)
			}
		}
		if code, _, _ := s.raw("GET", "/metrics", "", nil); code != http.StatusUnauthorized {
			t.Errorf("/metrics without a token: %d, want 401", code)
		}
		// A call that fails counts as an error and is logged like any other.
		if r := callHTTP(t, bob, map[string]any{"code": "raise ValueError('obs-failure')", "session": "errs"}); !r.IsError {
			t.Fatalf("a raising cell: isError false")
		}
		// The session gauges are refreshed every 2 s.
		var code int
		var body string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			code, _, body = s.raw("GET", "/metrics", "", bearerHeader(bobToken))
			if strings.Contains(body, `bridge_live_sessions{principal="alice"} 2`) {
				break
			}
		}
		for _, want := range []string{`bridge_calls_total{principal="alice",status="success"}`, `bridge_call_duration_seconds_bucket{principal="bob"`,
			`bridge_live_sessions{principal="alice"} 2`, `bridge_calls_total{principal="bob",status="success"} 2`,
			`bridge_call_errors_total{principal="bob",status="error"} 1`} {
			if code != 200 || !strings.Contains(body, want) {
				t.Errorf("/metrics: %d, missing %s", code, want)
			}
		}
		logs := s.stderr.String()
		// One access line per call, with its principal, session, duration
		// and status.
		var bobCalls, bobErrors int
		for _, line := range strings.Split(logs, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil || m["message"] != "call" || m["principal"] != "bob" {
				continue
			}
			if _, ok := m["duration_ms"].(float64); !ok {
				t.Errorf("access line without a duration: %s", line)
			}
			bobCalls++
			if m["status"] == "error" && m["session"] == "errs" {
				bobErrors++
			}
		}
		if bobCalls != 3 || bobErrors != 1 {
			t.Errorf("bob's access lines: %d (%d errors), want 3 (1 error), one per call:\n%s", bobCalls, bobErrors, logs)
		}
		if strings.Contains(logs, "alice-value") || strings.Contains(logs, "save_memory") {
			t.Errorf("code or values were logged at info")
		}
	})
}

// TestServeSIGTERM: calls in flight when SIGTERM comes all get a result:
// the short one finishes within the drain timeout, the long one is
// interrupted after it; /readyz answers 503 meanwhile, the exit code is 0
// and no container is left.
func TestServeSIGTERM(t *testing.T) {
	tokens := writeTokens(t, "alice "+aliceToken)
	s := startServe(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens}, "--drain-timeout", "6s")
	c := s.mustClient(aliceToken)
	// Warm both sessions so the calls below are running, not starting.
	for _, sess := range []string{"short", "long"} {
		callHTTP(t, c, map[string]any{"session": sess, "code": "import time"})
	}
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	results := map[string]chan outcome{}
	for sess, code := range map[string]string{"short": "time.sleep(2)\nprint('short done')", "long": "time.sleep(100)\nprint('long done')"} {
		ch := make(chan outcome, 1)
		results[sess] = ch
		go func(sess, code string) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "run_python"
			req.Params.Arguments = map[string]any{"session": sess, "code": code, "timeout": 110}
			r, err := c.CallTool(ctx, req)
			ch <- outcome{r, err}
		}(sess, code)
	}
	time.Sleep(700 * time.Millisecond) // both calls are running
	sent := time.Now()
	if err := s.cmd.Process.Signal(syscallSIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if code, _, _ := s.raw("GET", "/readyz", "", nil); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining: %d, want 503", code)
	}
	if code, _, _ := s.raw("POST", "/mcp", initializeBody, bearerHeader(aliceToken)); code != http.StatusServiceUnavailable {
		t.Errorf("a new request while draining: %d, want 503", code)
	}
	short := <-results["short"]
	if short.err != nil || text(t, short.res) != "short done" {
		t.Fatalf("short call: %v %+v", short.err, short.res)
	}
	long := <-results["long"]
	if long.err != nil {
		t.Fatalf("the long call got no result: %v", long.err)
	}
	t.Logf("long call result: %q", text(t, long.res))
	if got := text(t, long.res); !long.res.IsError || strings.Contains(got, "long done") || !strings.Contains(got, "--drain-timeout") {
		t.Errorf("long call: %q (isError %v), want an interrupted error", got, long.res.IsError)
	}
	if waited := time.Since(sent); waited < 5*time.Second {
		t.Errorf("the long call ended %v after SIGTERM, before the 6s drain timeout", waited)
	}
	select {
	case <-s.exited:
	case <-time.After(45 * time.Second):
		t.Fatal("bridge serve did not exit after the drain")
	}
	if s.err != nil {
		t.Errorf("exit: %v, want 0", s.err)
	}
}

// TestServeLimits: with one call slot per principal, alice's second call
// waits for her first only within its own timeout, while bob's call runs
// at once; alice's second session evicts her own idle one at her session
// cap, never bob's.
func TestServeLimits(t *testing.T) {
	tokens := writeTokens(t, "alice "+aliceToken, "bob "+bobToken)
	s := startServe(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens,
		"MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL": "1", "MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL": "1"})
	alice, bob := s.mustClient(aliceToken), s.mustClient(bobToken)
	callHTTP(t, bob, map[string]any{"code": "kept = 'bob'"})
	callHTTP(t, alice, map[string]any{"code": "import time"})
	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_python"
		req.Params.Arguments = map[string]any{"code": "time.sleep(4)\nprint('first')"}
		r, _ := alice.CallTool(ctx, req)
		first <- r
	}()
	time.Sleep(700 * time.Millisecond)
	start := time.Now()
	r := callHTTP(t, alice, map[string]any{"code": "print('second')", "timeout": 1})
	if got := text(t, r); !r.IsError || !strings.Contains(got, "MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL") {
		t.Errorf("alice's queued call: %q, want a timeout naming MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL", got)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("the queued call took %v, past its own 1s timeout", waited)
	}
	start = time.Now()
	if r := callHTTP(t, bob, map[string]any{"code": "print(kept)"}); text(t, r) != "bob" {
		t.Errorf("bob's call: %q", text(t, r))
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("bob's call took %v while alice's slot was taken", waited)
	}
	if r := <-first; r == nil || text(t, r) != "first" {
		t.Fatalf("alice's first call: %+v", r)
	}
	// At her cap of one session, alice's new session evicts her own.
	if r := callHTTP(t, alice, map[string]any{"session": "other", "code": "print(1)"}); r.IsError {
		t.Fatalf("alice's second session: %q", text(t, r))
	}
	if r := callHTTP(t, bob, map[string]any{"code": "print(kept)"}); text(t, r) != "bob" {
		t.Errorf("bob's session after alice's eviction: %q", text(t, r))
	}
}

// TestServeGlobalCap: at MCP_BRIDGE_MAX_SESSIONS a principal's new session
// evicts its own idle session; only a principal with no session ends
// another's (the least recently used idle one of the principal holding the
// most), whose next result says why.
func TestServeGlobalCap(t *testing.T) {
	const carolToken = "tok-carol-0b3e"
	tokens := writeTokens(t, "alice "+aliceToken, "bob "+bobToken, "carol "+carolToken)
	// The eviction notices; TestDurableAfterReplacement has the restore.
	s := startServe(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens, "MCP_BRIDGE_MAX_SESSIONS": "2", "MCP_BRIDGE_SESSION_DURABILITY": "off"})
	alice, bob, carol := s.mustClient(aliceToken), s.mustClient(bobToken), s.mustClient(carolToken)
	callHTTP(t, alice, map[string]any{"code": "v = 'alice'"})
	callHTTP(t, bob, map[string]any{"code": "v = 'bob'"})
	// alice at the cap ends her own idle session, never bob's.
	if r := callHTTP(t, alice, map[string]any{"session": "second", "code": "print(1)"}); r.IsError {
		t.Fatalf("alice's second session: %q", text(t, r))
	}
	if r := callHTTP(t, bob, map[string]any{"code": "print(v)"}); text(t, r) != "bob" {
		t.Errorf("bob's session after alice's second: %q, want it untouched", text(t, r))
	}
	// carol has no session: she ends the least recently used idle session
	// of the principal holding the most (alice and bob hold one each; the
	// tie goes by name), and is not refused (issue 36).
	if r := callHTTP(t, carol, map[string]any{"code": "print(1)"}); r.IsError || text(t, r) != "1" {
		t.Errorf("carol's first session at the cap: %q, want it served", text(t, r))
	}
	if r := callHTTP(t, bob, map[string]any{"code": "print(v)"}); text(t, r) != "bob" {
		t.Errorf("bob's session after carol's: %q, want it untouched", text(t, r))
	}
	// alice, now without a session, ends bob's (bob and carol hold one
	// each), and bob's next result says why his state is gone.
	r := callHTTP(t, alice, map[string]any{"code": "print(globals().get('v'))"})
	if got := text(t, r); !strings.HasPrefix(got, "None") {
		t.Errorf("alice's evicted default session: %q, want a fresh one", got)
	}
	r = callHTTP(t, bob, map[string]any{"code": "print(globals().get('v'))"})
	if got := text(t, r); !strings.HasPrefix(got, "None") ||
		!strings.Contains(got, "evicted while idle, so that another principal could start its first session (MCP_BRIDGE_MAX_SESSIONS=2)") {
		t.Errorf("bob's session after alice's return: %q, want a fresh one that says why", got)
	}
}
