package mcpwire

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// filtered POSTs a tools/call with id 7 through the filter (cap maxFrame)
// to a server that answers with contentType and body, and returns the
// body mcp-go would read.
func filtered(t *testing.T, maxFrame int, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: HTTPFilter(nil, "h", maxFrame), Timeout: 5 * time.Second}
	resp, err := hc.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// errorOf decodes the error reply in data: its id and message, or "" when
// it is not one the filter wrote.
func errorOf(t *testing.T, data string) (string, string) {
	t.Helper()
	var m struct {
		ID    json.RawMessage
		Error struct {
			Message string
			Data    any
		}
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("not JSON: %q: %v", data, err)
	}
	if data, ok := m.Error.Data.(map[string]any); !ok || data[badReplyMark] != true && data[badReplyMark] != overCapMark {
		return string(m.ID), ""
	}
	return string(m.ID), m.Error.Message
}

// TestHTTPJSONBody: a JSON response body the bridge cannot use becomes an
// error reply to the POSTed request, with the line a stdio server's reply
// would get; a good one passes unchanged but for invalid UTF-8.
func TestHTTPJSONBody(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"error.message object", `{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":{}}}`, "error.message is an object, not a string"},
		{"not JSON", `<html>oops</html>`, "it is not a JSON object"},
		{"deep", `{"jsonrpc":"2.0","id":7,"result":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, "nested deeper than 512 levels"},
		{"over the cap, id last", `{"jsonrpc":"2.0","result":{"t":"` + strings.Repeat("x", 20000) + `"},"id":7}`, "sent a reply over the 16384-byte frame limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, msg := errorOf(t, filtered(t, 16384, "application/json", tc.body))
			if id != "7" || !strings.HasPrefix(msg, "Server 'h' sent a reply") || !strings.Contains(msg, tc.want) {
				t.Errorf("id %s, message %q; want id 7 and %q", id, msg, tc.want)
			}
		})
	}
	good := `{"jsonrpc":"2.0","id":7,"result":{"t":"a` + "\xff" + `"}}`
	if got, want := filtered(t, 1024, "application/json", good), `{"jsonrpc":"2.0","id":7,"result":{"t":"a`+"\uFFFD"+`"}}`; got != want {
		t.Errorf("good body: got %q, want %q", got, want)
	}
}

// TestHTTPEventStream: each data event is one frame: notifications pass, a
// bad reply becomes an error reply to its id, a notification over the cap
// is dropped, and other fields pass.
func TestHTTPEventStream(t *testing.T) {
	stream := "event: endpoint\ndata: /message?sessionId=abc\n\n" +
		"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"d\":\"" + strings.Repeat("y", 4096) + "\"}}\n\n" +
		": a comment\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":7,\n" +
		"data: \"error\":{\"code\":\"x\",\"message\":\"m\"}}\n\n"
	got := filtered(t, 1024, "text/event-stream", stream)
	events := strings.Split(strings.TrimSuffix(got, "\n\n"), "\n\n")
	if len(events) != 3 {
		t.Fatalf("events %q, want the endpoint, the progress notification and the error reply", got)
	}
	if want := "event: endpoint\ndata: /message?sessionId=abc"; events[0] != want {
		t.Errorf("endpoint event %q, want it unchanged: %q", events[0], want)
	}
	events = events[1:]
	if want := "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}"; events[0] != want {
		t.Errorf("first event %q, want it unchanged: %q", events[0], want)
	}
	last := events[1]
	if !strings.HasPrefix(last, ": a comment\ndata: ") {
		t.Fatalf("second event %q, want the comment, then data", last)
	}
	id, msg := errorOf(t, strings.TrimPrefix(last, ": a comment\ndata: "))
	if id != "7" || !strings.Contains(msg, "error.code is a string, not an integer") {
		t.Errorf("id %s, message %q; want the bad error reply to 7", id, msg)
	}
}

// TestHTTPEndlessEvent: an event over the cap is answered as soon as its
// id is known, while the server is still sending it.
func TestHTTPEndlessEvent(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":7,"result":{"t":"`)
		chunk := bytes.Repeat([]byte("z"), 1024)
		for {
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	defer close(release)
	hc := &http.Client{Transport: HTTPFilter(nil, "h", 4096)}
	resp, err := hc.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	n, err := io.ReadAtLeast(resp.Body, buf, 10)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(strings.TrimPrefix(string(buf[:n]), "data: "))
	if id, msg := errorOf(t, line); id != "7" || !strings.Contains(msg, "over the 4096-byte frame limit") {
		t.Errorf("id %s, message %q; want the over-cap error to 7", id, msg)
	}
}

// TestHTTPPostedRequestAnswered: in the response to a POSTed request, a
// reply to another id never passes for its answer (mcp-go would take the
// first reply it reads), and a stream that ends unanswered, or a JSON body
// broken off, fails the request with a line naming the server.
func TestHTTPPostedRequestAnswered(t *testing.T) {
	stray := `{"jsonrpc":"2.0","id":"stray","result":{}}`
	if id, msg := errorOf(t, filtered(t, 1024, "application/json", stray)); id != "7" || !strings.Contains(msg, `it answers id "stray", not the request's 7`) {
		t.Errorf("JSON body answering another id: id %s, message %q", id, msg)
	}
	got := filtered(t, 1024, "text/event-stream", "data: "+stray+"\n\n")
	id, msg := errorOf(t, strings.TrimSpace(strings.TrimPrefix(got, "data: ")))
	if id != "7" || msg != "Server 'h' ended its reply stream without an answer" {
		t.Errorf("stream with a stray reply only: %q; want it dropped and the end answered", got)
	}
	if got := filtered(t, 1024, "text/event-stream", "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"); strings.Contains(got, "without an answer") {
		t.Errorf("a resumable stream was answered at its end: %q", got)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":7,"res`)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: HTTPFilter(nil, "h", 1024)}
	resp, err := hc.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if id, msg := errorOf(t, string(body)); id != "7" || !strings.HasPrefix(msg, "Server 'h' broke off its reply (") {
		t.Errorf("a broken-off body: id %s, message %q", id, msg)
	}
}
