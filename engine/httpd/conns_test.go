package httpd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestRefusalsCloseTheConnection: every refusal of /mcp answers at once
// with Connection: close and then closes, also for a request that declares
// a body it never sends (issue 36: such connections were held forever).
func TestRefusalsCloseTheConnection(t *testing.T) {
	srv := httptest.NewServer(testHandler(t, true))
	defer srv.Close()
	tests := []struct {
		name, headers string
		want          int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"unknown token", "Authorization: Bearer nope\r\n", http.StatusUnauthorized},
		{"Origin not allowed", "Origin: https://evil.example\r\n", http.StatusForbidden},
		{"unknown session", "Authorization: Bearer tok-alice\r\nMcp-Session-Id: made-up\r\n", http.StatusNotFound},
		{"body over the cap", fmt.Sprintf("Authorization: Bearer tok-alice\r\nContent-Length: %d\r\n", testMaxBody+1), http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		length := "Content-Length: 1000\r\n"
		if tt.want == http.StatusRequestEntityTooLarge {
			length = ""
		}
		start := time.Now()
		resp, br := rawRequest(t, srv.Listener.Addr().String(),
			fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s%s\r\n", length, tt.headers))
		if resp.StatusCode != tt.want || !resp.Close { // ReadResponse takes Connection: close into Close
			t.Errorf("%s: %d (Connection: close %v), want %d and close", tt.name, resp.StatusCode, resp.Close, tt.want)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: the connection stayed open (%v)", tt.name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: closed after %v", tt.name, d)
		}
	}
}

// rawRequest writes req on a new connection to addr and reads the
// response; the reader goes on with what follows it, and the connection
// closes when the test ends.
func rawRequest(t *testing.T, addr, req string) (*http.Response, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to %.40q: %v", req, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, br
}

// TestUnauthenticatedReadDeadline: a request that has not shown a token
// is read within the body deadline, whatever it is for: a client that
// trickles headers' worth of body to a health endpoint is cut off too.
func TestUnauthenticatedReadDeadline(t *testing.T) {
	srv := httptest.NewServer(testHandler(t, true))
	defer srv.Close()
	start := time.Now()
	// /healthz answers without reading the body; net/http then reads the
	// declared body before the next request, within the deadline.
	_, br := rawRequest(t, srv.Listener.Addr().String(), "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nx")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection stayed open (%v)", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %v, want about the 300ms deadline", d)
	}
}

// TestLimitPerAddr: past the cap, a connection from the same address is
// closed as soon as it is accepted; one closing frees its slot.
func TestLimitPerAddr(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitPerAddr(inner, 2, zerolog.Nop())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// alive says whether a request on c is answered.
	alive := func(c net.Conn) bool {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	a, b := dial(), dial()
	if !alive(a) || !alive(b) {
		t.Fatal("the first two connections were not served")
	}
	c := dial()
	if alive(c) {
		t.Error("a third connection from the same address was served")
	}
	c.Close()
	a.Close()
	// The server sees a's close when it next reads from it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := dial()
		ok := alive(d)
		d.Close()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's slot was not freed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Close()
	if got := LimitPerAddr(inner, 0, zerolog.Nop()); got != inner {
		t.Error("0 is no cap: want the listener itself")
	}
}
