package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeConnectionGuards: the built bridge serve holds an
// unauthenticated client to its guards (issue 36): a request that declares
// a body it never sends is answered and its connection closed at once,
// one address holds at most MCP_BRIDGE_MAX_CONNS_PER_ADDR connections, and
// /metrics answers only the --metrics-principal principals.
func TestServeConnectionGuards(t *testing.T) {
	env := map[string]string{"MCP_BRIDGE_TOKENS_FILE": writeTokens(t, "alice "+aliceToken, "prom "+bobToken), "MCP_BRIDGE_MAX_CONNS_PER_ADDR": "3"}
	s := startServe(t, env, "--metrics-principal", "prom")
	host := strings.TrimPrefix(strings.TrimSuffix(s.base, "/mcp"), "http://")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// A body declared and never sent, without a token: 401 and closed.
	c := dial()
	start := time.Now()
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", host)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to an unauthenticated request with a stalled body: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); resp.StatusCode != http.StatusUnauthorized || !resp.Close || err != io.EOF {
		t.Errorf("stalled unauthenticated body: %d, close %v, then %v; want 401, close and EOF", resp.StatusCode, resp.Close, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	c.Close()

	// Three idle connections from this address are the cap: a fourth is
	// closed as it is accepted (wait for the one closed above to be freed).
	deadline := time.Now().Add(10 * time.Second)
	for {
		held := []net.Conn{dial(), dial(), dial()}
		extra := dial()
		_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(extra, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		_, err := http.ReadResponse(bufio.NewReader(extra), nil)
		for _, h := range append(held, extra) {
			h.Close()
		}
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a fourth connection from one address was served with MCP_BRIDGE_MAX_CONNS_PER_ADDR=3")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// /metrics: prom may read it, alice may not. The server frees the
	// closed connections' slots as it reads their end.
	time.Sleep(time.Second)
	for _, tc := range []struct {
		token string
		want  int
	}{{bobToken, http.StatusOK}, {aliceToken, http.StatusForbidden}} {
		if code, _, body := s.raw("GET", "/metrics", "", bearerHeader(tc.token)); code != tc.want {
			t.Errorf("/metrics: %d, want %d: %s", code, tc.want, body)
		}
	}
}
