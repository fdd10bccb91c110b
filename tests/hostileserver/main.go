// Command hostileserver is a scripted MCP server for the bridge's
// hostile-upstream suite (tests/upstream_hostile_test.go, issue 34). It is
// written on the standard library alone, without an MCP SDK, so that it can
// send what no SDK would: error replies of every wrong JSON type, duplicate
// and stray ids, a reply cut off by its exit, a 40 MB line, 200,000-deep
// nesting, invalid UTF-8, junk tool catalogs, floods of notifications and of
// server→client requests, and no reply at all.
//
// It serves newline-delimited JSON-RPC on stdin and stdout, or, with
// --http ADDR, both HTTP transports, and then prints the streamable HTTP URL
// (http://ADDR/mcp) as the first line on stdout:
//
//   - streamable HTTP on POST /mcp: a reply is application/json, or
//     text/event-stream when the call sends more than its reply; no
//     Mcp-Session-Id, no GET stream;
//   - the legacy SSE transport on GET /sse (http://ADDR/sse), whose endpoint
//     event names POST /message?session=N: every message of the session goes
//     down its one event stream, and a cut ends that stream.
//
// initialize and tools/list are answered normally unless --mode says
// otherwise:
//
//	init-32022        initialize fails with -32022 and proper data
//	                  {"supported": ["2026-07-28"], "requested": ...}
//	init-32022-junk   -32022 whose data has every member of the wrong type
//	init-32022-text   -32022 whose data is a string
//	init-32042        initialize fails with -32042 (URL elicitation required)
//	tools-junk        tools/list holds, beside ok, tools whose inputSchema or
//	                  properties is not an object, names with a space, control
//	                  characters, or none, and a second "ok"
//	tools-junk-items  tools/list holds, beside ok, entries that are no tool
//	                  objects at all (a number, a string, null, a number name)
//	tools-not-array   tools/list's "tools" is an object
//
// Every other misbehaviour is a tool: see the tools table below (ok answers
// "fine", so a test proves that a good call still works). The server runs
// until stdin ends (stdio), or SIGINT or SIGTERM (HTTP).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-mcp/bridge/tests/fixturehttp"
)

// The sizes issue 34 names.
const (
	bigBytes      = 40 << 20 // the text of big's one line
	deepNesting   = 200_000  // the depth of deep's structuredContent
	notifications = 20_000   // notify_flood's notifications before its reply
	serverAsks    = 2_000    // request_flood's requests before its reply
)

// askWait bounds request_flood's wait for the answers: below the suite's
// MCP_BRIDGE_CALL_TIMEOUT (10 s), so that a transport that drops the
// requests gets "answered 0 of 2000" rather than a timeout.
const askWait = 8 * time.Second

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("hostileserver", flag.ContinueOnError)
	mode := fs.String("mode", "", "how initialize or tools/list misbehave (see the package doc); empty: normally")
	addr := fs.String("http", "", "serve streamable HTTP on this address (host:port; port 0 picks one) instead of stdio")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch *mode {
	case "", "init-32022", "init-32022-junk", "init-32022-text", "init-32042", "tools-junk", "tools-junk-items", "tools-not-array":
	default:
		fmt.Fprintf(os.Stderr, "hostileserver: unknown --mode %q\n", *mode)
		return 2
	}
	s := &server{mode: *mode, pending: map[string]chan struct{}{}, sessions: map[string]*sseSession{}}
	if *addr != "" {
		return s.serveHTTP(*addr)
	}
	return s.serveStdio()
}

// server is the protocol state shared by every call: the mode, the
// server→client requests awaiting their answer (by id), and the legacy SSE
// sessions (by the session parameter of their endpoint).
type server struct {
	mode     string
	mu       sync.Mutex
	pending  map[string]chan struct{}
	sessions map[string]*sseSession
	lastSSE  int
}

// message is any JSON-RPC message; the members the server reads stay raw.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// stream is where the messages of one request go: the stdio pipe, or the
// request's HTTP response.
type stream interface {
	// send writes a whole message ahead of the reply (on HTTP the response
	// becomes an event stream).
	send(raw []byte) error
	// reply writes the reply, the last message of the request.
	reply(raw []byte)
	// cut writes the first half of raw and ends the connection abruptly:
	// the process exits (stdio), or the response is aborted (HTTP).
	cut(raw []byte)
	// gone is closed when the client is gone (HTTP); nil on stdio.
	gone() <-chan struct{}
}

// handle answers one request on st.
func (s *server) handle(st stream, m message) {
	id := string(m.ID)
	switch m.Method {
	case "initialize":
		s.initialize(st, id, m.Params)
	case "tools/list":
		s.toolsList(st, id)
	case "tools/call":
		s.call(st, id, m.Params)
	case "ping":
		st.reply(result(id, `{}`))
	default:
		st.reply([]byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"method not found"}}`))
	}
}

func (s *server) initialize(st stream, id string, params json.RawMessage) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	requested, _ := json.Marshal(p.ProtocolVersion)
	fail := func(code int, message, data string) {
		st.reply([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q,"data":%s}}`, id, code, message, data)))
	}
	switch s.mode {
	case "init-32022":
		fail(-32022, "Unsupported protocol version", `{"supported":["2026-07-28"],"requested":`+string(requested)+`}`)
	case "init-32022-junk":
		fail(-32022, "Unsupported protocol version", `{"supported":[1,{"v":null},["2026-07-28"]],"requested":{"v":[true]}}`)
	case "init-32022-text":
		fail(-32022, "Unsupported protocol version", `"use 2026-07-28"`)
	case "init-32042":
		fail(-32042, "This request requires more information", `{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://example.com/connect","message":"Connect your account"}]}`)
	default:
		st.reply(result(id, `{"protocolVersion":`+string(requested)+`,"capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1.0.0"}}`))
	}
}

// schema is an input schema with no parameters.
const schema = `{"type":"object","properties":{}}`

func (s *server) toolsList(st stream, id string) {
	var tools []string
	tool := func(name, schema string) string {
		return `{"name":` + name + `,"description":"a scripted misbehaviour","inputSchema":` + schema + `}`
	}
	switch s.mode {
	case "tools-not-array":
		st.reply(result(id, `{"tools":{"ok":`+tool(`"ok"`, schema)+`}}`))
		return
	case "tools-junk":
		tools = []string{
			tool(`"ok"`, schema),
			tool(`"schema_string"`, `"an object, honest"`),
			tool(`"schema_array"`, `[{"type":"object"}]`),
			tool(`"schema_null"`, `null`),
			tool(`"schema_number"`, `7`),
			tool(`"props_string"`, `{"type":"object","properties":"none"}`),
			tool(`"props_array"`, `{"type":"object","properties":[{"a":{"type":"string"}}]}`),
			tool(`"props_junk"`, `{"type":"object","properties":{"a":5,"b":null,"c":"x"},"required":"a"}`),
			tool(`"has space"`, schema),
			tool(`"ctl\u0001\u0007\nname"`, schema),
			tool(`""`, schema),
			tool(`"def"`, schema),
			tool(`"ok"`, `{"type":"object","properties":{"dup":{"type":"string"}},"required":["dup"]}`),
		}
	case "tools-junk-items":
		tools = []string{tool(`"ok"`, schema), `5`, `"ok"`, `null`, `[]`, tool(`7`, schema), `{"description":"no name"}`}
	default:
		for _, t := range callTools {
			tools = append(tools, tool(strconv.Quote(t.name), t.schema))
		}
	}
	st.reply(result(id, `{"tools":[`+strings.Join(tools, ",")+`]}`))
}

// lateSchema is late's: after, the seconds before its reply.
const lateSchema = `{"type":"object","properties":{"after":{"type":"number"}}}`

// toolDef is one tool of the normal catalog.
type toolDef struct{ name, schema string }

// callTools are the tools of the normal catalog, each one misbehaviour;
// the error shapes add one tool each (errorShapes).
var callTools = append([]toolDef{
	{"ok", schema},            // "fine"
	{"dup_id", schema},        // the reply twice ("fine", then "stray")
	{"unknown_id", schema},    // replies to ids never sent, then "fine"
	{"late", lateSchema},      // "late" after `after` seconds
	{"never", schema},         // no reply
	{"cutoff", schema},        // half a reply, then the exit
	{"big", schema},           // a 40 MB line
	{"deep", schema},          // 200,000-deep structuredContent
	{"bad_utf8", schema},      // invalid UTF-8 in the text
	{"notify_flood", schema},  // 20,000 notifications, then "flooded 20000"
	{"request_flood", schema}, // 2,000 requests, then "answered N of 2000"
}, errorShapeTools()...)

// errorShapes are replies whose error member, or its code or message, has
// a wrong JSON type or is missing, or that carry both a result and an
// error, or neither: the tool's name, then the members after "id".
var errorShapes = []struct{ name, members string }{
	{"err_code_string", `"error":{"code":"-32000","message":"boom"}`},
	{"err_code_float", `"error":{"code":1.5,"message":"boom"}`},
	{"err_code_bool", `"error":{"code":true,"message":"boom"}`},
	{"err_code_null", `"error":{"code":null,"message":"boom"}`},
	{"err_code_object", `"error":{"code":{"n":-32000},"message":"boom"}`},
	{"err_code_array", `"error":{"code":[-32000],"message":"boom"}`},
	{"err_code_missing", `"error":{"message":"boom"}`},
	{"err_message_number", `"error":{"code":-32000,"message":42}`},
	{"err_message_bool", `"error":{"code":-32000,"message":false}`},
	{"err_message_null", `"error":{"code":-32000,"message":null}`},
	{"err_message_object", `"error":{"code":-32000,"message":{"text":"boom"}}`},
	{"err_message_array", `"error":{"code":-32000,"message":["boom"]}`},
	{"err_message_missing", `"error":{"code":-32000}`},
	{"err_empty", `"error":{}`},
	{"err_null", `"error":null`},
	{"err_string", `"error":"boom"`},
	{"err_number", `"error":-32000`},
	{"err_array", `"error":[-32000,"boom"]`},
	{"err_and_result", `"error":{"code":-32000,"message":"boom"},"result":{"content":[{"type":"text","text":"fine"}]}`},
	{"no_result_no_error", ``},
}

func errorShapeTools() []toolDef {
	var out []toolDef
	for _, e := range errorShapes {
		out = append(out, toolDef{e.name, schema})
	}
	return out
}

// call answers a tools/call as its tool says.
func (s *server) call(st stream, id string, params json.RawMessage) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			After float64 `json:"after"`
		} `json:"arguments"`
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	for _, e := range errorShapes {
		if p.Name == e.name {
			members := ""
			if e.members != "" {
				members = "," + e.members
			}
			st.reply([]byte(`{"jsonrpc":"2.0","id":` + id + members + `}`))
			return
		}
	}
	switch p.Name {
	case "ok":
		st.reply(textResult(id, "fine"))
	case "dup_id":
		if st.send(textResult(id, "fine")) == nil {
			st.reply(textResult(id, "stray"))
		}
	case "unknown_id":
		for _, other := range []string{`"nobody-asked"`, `987654321`, `null`, `{"id":1}`} {
			if st.send(textResult(other, "stray")) != nil {
				return
			}
		}
		st.reply(textResult(id, "fine"))
	case "late":
		t := time.NewTimer(time.Duration(p.Arguments.After * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			st.reply(textResult(id, "late"))
		case <-st.gone():
		}
	case "never":
		<-st.gone() // on stdio: until the process ends
	case "cutoff":
		st.cut(textResult(id, "fine"))
	case "big":
		st.reply(textResult(id, strings.Repeat("x", bigBytes)))
	case "deep":
		var b bytes.Buffer
		b.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":{"deep":`)
		b.WriteString(strings.Repeat("[", deepNesting))
		b.WriteString(strings.Repeat("]", deepNesting))
		b.WriteString(`}}}`)
		st.reply(b.Bytes())
	case "bad_utf8":
		// Raw bytes, no JSON escapes: 0xff and 0xfe never occur in UTF-8,
		// and 0xc3 starts a sequence that the space after it breaks.
		st.reply([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"bad ` + "\xff\xfe\xc3" + ` utf8"}]}}`))
	case "notify_flood":
		token := string(p.Meta.ProgressToken)
		if token == "" {
			token = `"no-such-token"`
		}
		for i := range notifications {
			n := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"flood","data":"note %d"}}`, i)
			if i%2 == 1 {
				n = fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":%d,"message":"step %d"}}`, token, i, notifications, i)
			}
			if st.send([]byte(n)) != nil {
				return
			}
		}
		st.reply(textResult(id, fmt.Sprintf("flooded %d", notifications)))
	case "request_flood":
		s.requestFlood(st, id)
	default:
		st.reply([]byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32602,"message":"unknown tool"}}`))
	}
}

// requestFlood sends serverAsks requests (ping, roots/list and
// sampling/createMessage in turn) before its reply, and reports how many
// were answered within askWait.
func (s *server) requestFlood(st stream, id string) {
	key := strings.Trim(id, `"`)
	waits := make([]chan struct{}, serverAsks)
	ids := make([]string, serverAsks)
	s.mu.Lock()
	for i := range waits {
		ids[i] = fmt.Sprintf("srv-%s-%d", key, i)
		waits[i] = make(chan struct{})
		s.pending[ids[i]] = waits[i]
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, k := range ids {
			delete(s.pending, k)
		}
		s.mu.Unlock()
	}()
	for i, rid := range ids {
		var req string
		switch i % 3 {
		case 0:
			req = fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"ping"}`, rid)
		case 1:
			req = fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"roots/list"}`, rid)
		case 2:
			req = fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}}`, rid)
		}
		if st.send([]byte(req)) != nil {
			return
		}
	}
	if f, ok := st.(interface{ flush() }); ok {
		f.flush()
	}
	deadline := time.NewTimer(askWait)
	defer deadline.Stop()
	answered := 0
wait:
	for _, w := range waits {
		select {
		case <-w:
			answered++
		case <-deadline.C:
			break wait
		case <-st.gone():
			return
		}
	}
	st.reply(textResult(id, fmt.Sprintf("answered %d of %d", answered, serverAsks)))
}

// answered records a client's reply to one of the server's requests.
func (s *server) answered(raw json.RawMessage) {
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.pending[id]; ok {
		close(w)
		delete(s.pending, id)
	}
}

func result(id, res string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + res + `}`)
}

func textResult(id, text string) []byte {
	t, _ := json.Marshal(text)
	return result(id, `{"content":[{"type":"text","text":`+string(t)+`}]}`)
}

// serveStdio reads one message a line until stdin ends. Each request is
// answered on its own goroutine, so a call that never answers holds no
// other; writes are whole lines under one lock.
func (s *server) serveStdio() int {
	out := &stdioStream{w: os.Stdout}
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m message
			if json.Unmarshal(line, &m) == nil {
				switch {
				case m.Method == "" && len(m.ID) > 0:
					s.answered(m.ID)
				case len(m.ID) > 0 && string(m.ID) != "null":
					go s.handle(out, m)
				}
			}
		}
		if err != nil {
			return 0
		}
	}
}

type stdioStream struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *stdioStream) send(raw []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.w.Write(append(raw[:len(raw):len(raw)], '\n'))
	return err
}

func (o *stdioStream) reply(raw []byte) { _ = o.send(raw) }

func (o *stdioStream) cut(raw []byte) {
	o.mu.Lock() // held until the exit: nothing else gets written
	_, _ = o.w.Write(raw[:len(raw)/2])
	os.Exit(3)
}

func (o *stdioStream) gone() <-chan struct{} { return nil }

// serveHTTP serves POST /mcp on addr until SIGINT or SIGTERM.
func (s *server) serveHTTP(addr string) int {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", s.serveMCP)
	mux.HandleFunc("GET /sse", s.serveSSE)
	mux.HandleFunc("POST /message", s.serveMessage)
	return fixturehttp.Serve("hostileserver", addr, mux)
}

func (s *server) serveMCP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK) // no session to end
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	m, ok := readMessage(w, r)
	if !ok {
		return
	}
	if m.Method == "" && len(m.ID) > 0 {
		s.answered(m.ID)
	}
	if m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
		w.WriteHeader(http.StatusAccepted) // a notification, or a reply to the server
		return
	}
	s.handle(&httpStream{w: w, r: r}, m)
}

// httpStream is one POST's response: application/json for a lone reply,
// an event stream once the call sends more.
type httpStream struct {
	w   http.ResponseWriter
	r   *http.Request
	sse bool
}

func (h *httpStream) send(raw []byte) error {
	if !h.sse {
		h.sse = true
		h.w.Header().Set("Content-Type", "text/event-stream")
		h.w.WriteHeader(http.StatusOK)
	}
	if _, err := fmt.Fprintf(h.w, "event: message\ndata: %s\n\n", raw); err != nil {
		return err
	}
	return h.r.Context().Err()
}

func (h *httpStream) flush() { _ = http.NewResponseController(h.w).Flush() }

func (h *httpStream) reply(raw []byte) {
	if h.sse {
		_ = h.send(raw)
		h.flush()
		return
	}
	h.w.Header().Set("Content-Type", "application/json")
	h.w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	_, _ = h.w.Write(raw)
}

func (h *httpStream) cut(raw []byte) {
	if h.sse {
		_, _ = fmt.Fprintf(h.w, "event: message\ndata: %s", raw[:len(raw)/2])
	} else {
		h.w.Header().Set("Content-Type", "application/json")
		h.w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
		_, _ = h.w.Write(raw[:len(raw)/2])
	}
	h.flush()
	panic(http.ErrAbortHandler) // net/http drops the connection mid-body
}

func (h *httpStream) gone() <-chan struct{} { return h.r.Context().Done() }

// sseSession is one legacy SSE connection: the GET handler writes what
// comes on out to its event stream until the client goes (done).
type sseSession struct {
	out  chan sseFrame
	done chan struct{}
}

// sseFrame is one message for the stream; cut: write its first half and
// end the stream abruptly.
type sseFrame struct {
	raw []byte
	cut bool
}

// serveSSE holds a legacy SSE session's event stream: the endpoint event,
// then every message of the session.
func (s *server) serveSSE(w http.ResponseWriter, r *http.Request) {
	sess := &sseSession{out: make(chan sseFrame), done: make(chan struct{})}
	s.mu.Lock()
	s.lastSSE++
	key := strconv.Itoa(s.lastSSE)
	s.sessions[key] = sess
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, key)
		s.mu.Unlock()
		close(sess.done)
	}()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: endpoint\ndata: /message?session=%s\n\n", key)
	_ = rc.Flush()
	for {
		select {
		case f := <-sess.out:
			if f.cut {
				fmt.Fprintf(w, "event: message\ndata: %s", f.raw[:len(f.raw)/2])
				_ = rc.Flush()
				panic(http.ErrAbortHandler) // net/http drops the connection mid-event
			}
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", f.raw)
			_ = rc.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// serveMessage takes a message of a legacy SSE session: 202 at once, the
// answer (if any) down the session's stream.
func (s *server) serveMessage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sess := s.sessions[r.URL.Query().Get("session")]
	s.mu.Unlock()
	if sess == nil {
		http.Error(w, "no such session", http.StatusNotFound)
		return
	}
	m, ok := readMessage(w, r)
	if !ok {
		return
	}
	w.WriteHeader(http.StatusAccepted)
	switch {
	case m.Method == "" && len(m.ID) > 0:
		s.answered(m.ID)
	case m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null":
		// Its own goroutine, past this request's end: the answer goes
		// down the event stream, and a call that never answers holds no
		// other. It ends with the session (every send fails after done).
		go s.handle(sseStream{sess}, m)
	}
}

// sseStream is one request's view of a legacy SSE session.
type sseStream struct{ sess *sseSession }

func (st sseStream) send(raw []byte) error {
	select {
	case st.sess.out <- sseFrame{raw: raw}:
		return nil
	case <-st.sess.done:
		return errors.New("the session ended")
	}
}

func (st sseStream) reply(raw []byte) { _ = st.send(raw) }

func (st sseStream) cut(raw []byte) {
	select {
	case st.sess.out <- sseFrame{raw: raw, cut: true}:
	case <-st.sess.done:
	}
}

func (st sseStream) gone() <-chan struct{} { return st.sess.done }

// readMessage reads the JSON-RPC message a POST carries; a bad one is
// answered 400 and not ok.
func readMessage(w http.ResponseWriter, r *http.Request) (message, bool) {
	var m message
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || json.Unmarshal(body, &m) != nil {
		http.Error(w, "bad JSON-RPC message", http.StatusBadRequest)
		return m, false
	}
	return m, true
}
