// Command modernserver is a hand-written MCP server for the bridge's
// end-to-end tests that speaks only protocol revision 2026-07-28, the
// stateless revision: there is no initialize, and every request carries in
// its params._meta the protocol version, the client capabilities and the
// client info. It never falls back to an older revision, so a test that
// reaches it proves the bridge spoke the modern protocol. It is written on
// the standard library alone, without an MCP SDK, so that nothing in it
// negotiates on its own.
//
// Transports:
//
//   - stdio (the default): newline-delimited JSON-RPC on stdin and stdout
//     until stdin ends; lines are capped at 4 MiB, blank lines ignored, and a
//     line that is no JSON is answered -32700 with id null. Each request runs
//     on its own goroutine (so a notifications/cancelled can stop a running
//     one), and stdout carries only JSON-RPC; diagnostics go to stderr.
//   - --http ADDR: streamable HTTP on POST /mcp (other methods 405), one
//     JSON-RPC message a body (capped at 4 MiB). The first line on stdout is
//     http://<actual address>/mcp; the server runs until SIGINT or SIGTERM.
//     Notifications get 202 with no body; replies are application/json with
//     status 200, or 400 for the errors marked so below; the slow tool
//     answers with a text/event-stream. Mcp-Session-Id is never set nor
//     required.
//
// --log FILE appends one JSON object a line for every message received
// (requests and notifications): method, id (null when absent), version (the
// _meta protocol version string, or ""), caps and info (whether the _meta
// client capabilities and client info are objects), tasksExt (whether the
// capabilities' extensions name io.modelcontextprotocol/tasks) and, over
// HTTP, headers (Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*).
// It also logs {"event":"cancelled","id":...} when a running slow call is
// stopped, and {"event":"task-cancelled","id":taskId} on tasks/cancel.
// --name and --version set the serverInfo (modern-fixture, 4.0.0).
//
// Every request but initialize is first checked, in this order:
//
//	_meta protocol version missing or not 2026-07-28   -32022, HTTP 400
//	_meta client capabilities missing or no object     -32602, HTTP 400
//	HTTP: Mcp-Protocol-Version, Mcp-Method, Mcp-Name   -32020, HTTP 400
//	      (tools/call, prompts/get: params.name; resources/read:
//	      params.uri) and, for tools/call of lookup, Mcp-Param-Region
//
// initialize itself always fails with -32022 (HTTP 400), whose data is
// {"supported":["2026-07-28"],"requested":...}. Mcp-Name and Mcp-Param-*
// values may be wrapped as =?base64?...?=, as the revision allows.
//
// Methods: server/discover, ping, tools/list, tools/call, resources/list,
// resources/read, tasks/get, tasks/update, tasks/cancel; anything else is
// -32601. Every result carries resultType ("complete" unless it says
// otherwise) and _meta io.modelcontextprotocol/serverInfo. The tools:
//
//	echo {text}       "modern: <text>", structuredContent {"echoed": text}
//	ask {}            multi round-trip: input_required with an elicitation
//	                  (key "colour") and a requestState, then, on the retry
//	                  with inputResponses and that requestState,
//	                  "answer: <action> <colour or ->"
//	slow {seconds}    notifications/progress every 100 ms, then "slow done";
//	                  stopped by notifications/cancelled (stdio) or by the
//	                  client closing the stream (HTTP), with no reply
//	task {seconds}    needs the tasks extension (-32021 otherwise); returns
//	                  a task that completes after seconds, or, when seconds
//	                  is negative, asks for input (tasks/update) after
//	                  |seconds| and then completes with the answer
//	lookup {region}   "region <region>"; region is an x-mcp-header (Region)
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bridge-mcp/bridge/tests/fixturehttp"
)

// protocolVersion is the one revision this server speaks.
const protocolVersion = "2026-07-28"

// maxMessage caps a stdio line and an HTTP body.
const maxMessage = 4 << 20

// The _meta keys of the 2026-07-28 revision, and the tasks extension's key.
const (
	metaVersion    = "io.modelcontextprotocol/protocolVersion"
	metaCaps       = "io.modelcontextprotocol/clientCapabilities"
	metaInfo       = "io.modelcontextprotocol/clientInfo"
	metaServerInfo = "io.modelcontextprotocol/serverInfo"
	tasksExtension = "io.modelcontextprotocol/tasks"
)

// JSON-RPC and MCP error codes.
const (
	codeParse              = -32700
	codeMethodNotFound     = -32601
	codeInvalidParams      = -32602
	codeInternal           = -32603
	codeResourceNotFound   = -32002
	codeHeaderMismatch     = -32020
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("modernserver", flag.ContinueOnError)
	addr := fs.String("http", "", "serve streamable HTTP on this address (host:port; port 0 picks one) instead of stdio")
	logPath := fs.String("log", "", "append one JSON line per message received to this file")
	name := fs.String("name", "modern-fixture", "serverInfo name")
	version := fs.String("version", "4.0.0", "serverInfo version")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log, err := openLog(*logPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "modernserver: %v\n", err)
		return 1
	}
	s := &server{
		log:    log,
		meta:   map[string]any{metaServerInfo: map[string]string{"name": *name, "version": *version}},
		states: map[string]bool{},
		tasks:  map[string]*task{},
	}
	if *addr != "" {
		return s.serveHTTP(*addr)
	}
	return s.serveStdio()
}

// server is the state shared by every request: the log, the _meta every
// result carries, the requestStates ask has issued and the tasks.
type server struct {
	log  *eventLog
	meta map[string]any

	mu       sync.Mutex
	states   map[string]bool
	tasks    map[string]*task
	lastTask int
	// grown says the grow tool ran: tools/list then holds extra too.
	// listeners are the open subscriptions/listen requests that asked for
	// toolsListChanged; a notification to one is sent under mu, so never
	// after its request ended.
	grown     bool
	listeners map[*call]bool
}

// ---------------------------------------------------------------------------
// Messages

// message is any JSON-RPC message; the members the server reads stay raw.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// isRequest says whether m expects a reply. An id of null is treated as no
// id: there is nothing a reply could be matched to.
func (m message) isRequest() bool {
	return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null"
}

// requestMeta is what the server reads from a request's params._meta.
type requestMeta struct {
	version       json.RawMessage // the protocol version as sent; nil when absent
	caps          bool            // client capabilities are an object
	info          bool            // client info is an object
	tasksExt      bool            // capabilities.extensions names the tasks extension
	progressToken json.RawMessage // nil when absent
}

// versionString is the protocol version when it is a string, else "".
func (m requestMeta) versionString() string {
	var v string
	_ = json.Unmarshal(m.version, &v)
	return v
}

// parseMeta reads params._meta; params that are no object have no _meta.
func parseMeta(params json.RawMessage) requestMeta {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return requestMeta{}
	}
	m := requestMeta{
		version:       p.Meta[metaVersion],
		caps:          isObject(p.Meta[metaCaps]),
		info:          isObject(p.Meta[metaInfo]),
		progressToken: p.Meta["progressToken"],
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if m.caps && json.Unmarshal(p.Meta[metaCaps], &caps) == nil {
		_, m.tasksExt = caps.Extensions[tasksExtension]
	}
	return m
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// rpcError is a JSON-RPC error reply's error member. status is the HTTP
// status it is sent with when it is the whole response.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	status  int
}

func (e *rpcError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

// fail is an error sent with HTTP status 200.
func fail(code int, message string) *rpcError {
	return &rpcError{Code: code, Message: message, status: http.StatusOK}
}

// unsupportedVersion is the -32022 refusal; requested is the version the
// request carried as sent (a string, or whatever JSON it was), "" if none.
func unsupportedVersion(requested json.RawMessage) *rpcError {
	if len(requested) == 0 {
		requested = json.RawMessage(`""`)
	}
	return &rpcError{
		Code:    codeUnsupportedVersion,
		Message: "Unsupported protocol version: this server speaks only " + protocolVersion,
		Data:    map[string]any{"supported": []string{protocolVersion}, "requested": requested},
		status:  http.StatusBadRequest,
	}
}

func headerMismatch(header string) *rpcError {
	return &rpcError{Code: codeHeaderMismatch, Message: "header mismatch: " + header, status: http.StatusBadRequest}
}

// errNoReply ends a request that must not be answered (it was cancelled).
var errNoReply = errors.New("no reply")

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func encode(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil { // only the server's own values get here
		panic(fmt.Errorf("encode: %w", err))
	}
	return raw
}

func resultMessage(id json.RawMessage, result any) []byte {
	return encode(response{JSONRPC: "2.0", ID: id, Result: result})
}

func errorMessage(id json.RawMessage, e *rpcError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return encode(response{JSONRPC: "2.0", ID: id, Error: e})
}

func notification(method string, params any) []byte {
	return encode(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// ---------------------------------------------------------------------------
// The log

// eventLog appends JSON lines to a file. Each line is one write on an
// O_APPEND file under a lock, so lines never interleave and a test reading
// the file sees each whole line as soon as it is written. A nil log logs
// nothing.
type eventLog struct {
	mu sync.Mutex
	f  *os.File
}

func openLog(path string) (*eventLog, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return &eventLog{f: f}, nil
}

func (l *eventLog) write(v any) {
	if l == nil {
		return
	}
	line := append(encode(v), '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(line); err != nil {
		fmt.Fprintf(os.Stderr, "modernserver: log: %v\n", err)
	}
}

// received is the log line of one message.
type received struct {
	Method   string            `json:"method"`
	ID       json.RawMessage   `json:"id"`
	Version  string            `json:"version"`
	Caps     bool              `json:"caps"`
	Info     bool              `json:"info"`
	TasksExt bool              `json:"tasksExt"`
	Headers  map[string]string `json:"headers,omitzero"` // non-nil over HTTP, even if empty
}

// record logs m; header is nil on stdio.
func (l *eventLog) record(m message, header http.Header) {
	meta := parseMeta(m.Params)
	id := m.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	l.write(received{
		Method:   m.Method,
		ID:       id,
		Version:  meta.versionString(),
		Caps:     meta.caps,
		Info:     meta.info,
		TasksExt: meta.tasksExt,
		Headers:  mcpHeaders(header),
	})
}

// mcpHeaders picks the MCP headers out of header (nil on stdio).
func mcpHeaders(header http.Header) map[string]string {
	if header == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range header { // the server gives keys in canonical form
		switch {
		case k == "Mcp-Protocol-Version", k == "Mcp-Method", k == "Mcp-Name", strings.HasPrefix(k, "Mcp-Param-"):
			out[k] = strings.Join(v, ", ")
		}
	}
	return out
}

func (l *eventLog) event(name string, id any) {
	l.write(map[string]any{"event": name, "id": id})
}

// ---------------------------------------------------------------------------
// Dispatch

// conn is where one request's messages go: stdout, or the request's HTTP
// response.
type conn interface {
	// stream makes the rest of the response an event stream (HTTP); a
	// no-op on stdio.
	stream()
	// notify sends a message ahead of the reply.
	notify(raw []byte)
	// reply sends the reply; status is the HTTP status if it is the whole
	// response.
	reply(raw []byte, status int)
}

// call is one request being answered.
type call struct {
	ctx    context.Context // ends when the request is cancelled
	id     json.RawMessage
	method string
	params json.RawMessage
	meta   requestMeta
	header http.Header // nil on stdio
	out    conn
}

// handler answers one method; its error is an *rpcError or errNoReply.
type handler func(s *server, c *call) (map[string]any, error)

var methods = map[string]handler{
	"server/discover": (*server).discover,
	"ping":            (*server).ping,
	"tools/list":      (*server).toolsList,
	"tools/call":      (*server).toolsCall,
	"resources/list":  (*server).resourcesList,
	"resources/read":  (*server).resourcesRead,
	"tasks/get":       (*server).tasksGet,
	"tasks/update":    (*server).tasksUpdate,
	"tasks/cancel":    (*server).tasksCancel,

	"subscriptions/listen": (*server).listen,
}

// dispatch answers c on c.out.
func (s *server) dispatch(c *call) {
	result, err := s.answer(c)
	var rerr *rpcError
	switch {
	case errors.Is(err, errNoReply):
	case errors.As(err, &rerr):
		c.out.reply(errorMessage(c.id, rerr), rerr.status)
	case err != nil:
		e := fail(codeInternal, err.Error())
		c.out.reply(errorMessage(c.id, e), e.status)
	default:
		c.out.reply(resultMessage(c.id, s.finish(result)), http.StatusOK)
	}
}

// answer checks c and runs its method.
func (s *server) answer(c *call) (map[string]any, error) {
	if c.method == "initialize" {
		// Refused whatever it asks: this server has no older revision to
		// fall back to.
		var p struct {
			ProtocolVersion json.RawMessage `json:"protocolVersion"`
		}
		_ = json.Unmarshal(c.params, &p)
		return nil, unsupportedVersion(p.ProtocolVersion)
	}
	if err := checkMeta(c.meta); err != nil {
		return nil, err
	}
	if c.header != nil {
		if err := checkHeaders(c); err != nil {
			return nil, err
		}
	}
	h, ok := methods[c.method]
	if !ok {
		return nil, fail(codeMethodNotFound, "method not found: "+c.method)
	}
	return h(s, c)
}

// finish adds what every result carries: resultType (complete unless the
// method set another) and the serverInfo _meta.
func (s *server) finish(result map[string]any) map[string]any {
	if result == nil {
		result = map[string]any{}
	}
	if _, ok := result["resultType"]; !ok {
		result["resultType"] = "complete"
	}
	result["_meta"] = s.meta
	return result
}

// checkMeta enforces the _meta every 2026-07-28 request carries.
func checkMeta(m requestMeta) *rpcError {
	if m.versionString() != protocolVersion {
		return unsupportedVersion(m.version)
	}
	if !m.caps {
		return &rpcError{Code: codeInvalidParams, Message: "missing _meta " + metaCaps, status: http.StatusBadRequest}
	}
	return nil
}

// checkHeaders enforces the standard headers of a request over HTTP, which
// must mirror its body.
func checkHeaders(c *call) *rpcError {
	if !headerIs(c.header, "Mcp-Protocol-Version", protocolVersion, false) {
		return headerMismatch("Mcp-Protocol-Version")
	}
	if !headerIs(c.header, "Mcp-Method", c.method, false) {
		return headerMismatch("Mcp-Method")
	}
	var p struct {
		Name      string `json:"name"`
		URI       string `json:"uri"`
		Arguments struct {
			Region *string `json:"region"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(c.params, &p)
	switch c.method {
	case "tools/call", "prompts/get":
		if !headerIs(c.header, "Mcp-Name", p.Name, true) {
			return headerMismatch("Mcp-Name")
		}
	case "resources/read":
		if !headerIs(c.header, "Mcp-Name", p.URI, true) {
			return headerMismatch("Mcp-Name")
		}
	}
	// A region that is no string is the tool's own -32602, not a header
	// matter: a client sends no header for it.
	if c.method == "tools/call" && p.Name == "lookup" && p.Arguments.Region != nil {
		if !headerIs(c.header, "Mcp-Param-Region", *p.Arguments.Region, true) {
			return headerMismatch("Mcp-Param-Region")
		}
	}
	return nil
}

// headerIs says whether header carries key once, with the value want.
// encoded: the value may be wrapped as =?base64?...?=, which the revision
// uses for names and parameters that are no plain ASCII.
func headerIs(header http.Header, key, want string, encoded bool) bool {
	values := header.Values(key)
	if len(values) != 1 {
		return false
	}
	got := values[0]
	if encoded {
		var ok bool
		if got, ok = decodeHeaderValue(got); !ok {
			return false
		}
	}
	return got == want
}

func decodeHeaderValue(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	if inner, ok = strings.CutSuffix(inner, "?="); !ok {
		return v, true
	}
	decoded, err := base64.StdEncoding.DecodeString(inner)
	return string(decoded), err == nil
}

// ---------------------------------------------------------------------------
// Methods

func (s *server) discover(*call) (map[string]any, error) {
	return map[string]any{
		"supportedVersions": []string{protocolVersion},
		"capabilities": map[string]any{
			"tools":      map[string]any{"listChanged": true},
			"resources":  map[string]any{},
			"extensions": map[string]any{tasksExtension: map[string]any{}},
		},
		"instructions": "A modern-only fixture.",
		"ttlMs":        0,
		"cacheScope":   "private",
	}, nil
}

func (s *server) ping(*call) (map[string]any, error) {
	return map[string]any{}, nil
}

// toolsJSON is the tool catalog.
const toolsJSON = `[
	{"name":"echo","description":"Echo the text back.",
	 "inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},
	 "outputSchema":{"type":"object","properties":{"echoed":{"type":"string"}},"required":["echoed"]}},
	{"name":"ask","description":"Ask the user for a colour (multi round-trip).",
	 "inputSchema":{"type":"object","properties":{}}},
	{"name":"slow","description":"Report progress every 100 ms for the given seconds.",
	 "inputSchema":{"type":"object","properties":{"seconds":{"type":"number"}},"required":["seconds"]}},
	{"name":"task","description":"Run as a task for the given seconds (negative: ask for input after them).",
	 "inputSchema":{"type":"object","properties":{"seconds":{"type":"number"}},"required":["seconds"]}},
	{"name":"lookup","description":"Look up a region; the region travels in the Mcp-Param-Region header.",
	 "inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}},
	{"name":"grow","description":"Add the extra tool and tell the listeners (notifications/tools/list_changed).",
	 "inputSchema":{"type":"object","properties":{}}}
]`

// extraJSON is the tool grow adds.
const extraJSON = `{"name":"extra","description":"A tool that appeared after grow.","inputSchema":{"type":"object","properties":{}}}`

func (s *server) toolsList(*call) (map[string]any, error) {
	s.mu.Lock()
	grown := s.grown
	s.mu.Unlock()
	if grown {
		return map[string]any{"tools": json.RawMessage(strings.TrimSuffix(strings.TrimSpace(toolsJSON), "]") + "," + extraJSON + "]")}, nil
	}
	return map[string]any{"tools": json.RawMessage(toolsJSON)}, nil
}

// grow adds the extra tool and tells every listener that asked for it
// (notifications/tools/list_changed on its subscriptions/listen stream).
func (s *server) grow() (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grown = true
	for l := range s.listeners {
		l.out.notify(notification("notifications/tools/list_changed", map[string]any{
			"_meta": map[string]any{"io.modelcontextprotocol/subscriptionId": l.id}}))
	}
	return textResult(fmt.Sprintf("grown; %d listeners told", len(s.listeners))), nil
}

// listen is subscriptions/listen: it acknowledges toolsListChanged (the
// only kind this server sends) and holds the stream open until the client
// ends it; list changes are sent on it (grow).
func (s *server) listen(c *call) (map[string]any, error) {
	var p struct {
		Notifications struct {
			ToolsListChanged bool `json:"toolsListChanged"`
		} `json:"notifications"`
	}
	_ = json.Unmarshal(c.params, &p)
	c.out.stream()
	s.mu.Lock()
	if s.listeners == nil {
		s.listeners = map[*call]bool{}
	}
	if p.Notifications.ToolsListChanged {
		s.listeners[c] = true
	}
	c.out.notify(notification("notifications/subscriptions/acknowledged", map[string]any{
		"notifications": map[string]any{"toolsListChanged": p.Notifications.ToolsListChanged},
		"_meta":         map[string]any{"io.modelcontextprotocol/subscriptionId": c.id}}))
	s.mu.Unlock()
	<-c.ctx.Done()
	s.mu.Lock()
	delete(s.listeners, c)
	s.mu.Unlock()
	s.log.event("listen-ended", c.id)
	return nil, errNoReply
}

// callParams are a tools/call's params, with the multi round-trip members
// of a retry.
type callParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

func (s *server) toolsCall(c *call) (map[string]any, error) {
	var p callParams
	if err := json.Unmarshal(c.params, &p); err != nil {
		return nil, fail(codeInvalidParams, fmt.Sprintf("params: %v", err))
	}
	switch p.Name {
	case "echo":
		return echo(p)
	case "ask":
		return s.ask(p)
	case "slow":
		return s.slow(c, p)
	case "task":
		return s.startTask(c, p)
	case "lookup":
		return lookup(p)
	case "grow":
		return s.grow()
	}
	return nil, fail(codeInvalidParams, "unknown tool: "+p.Name)
}

// arguments decodes a call's arguments into v; absent arguments are {}.
func arguments(p callParams, v any) error {
	if len(p.Arguments) == 0 || string(p.Arguments) == "null" {
		return nil
	}
	if err := json.Unmarshal(p.Arguments, v); err != nil {
		return fail(codeInvalidParams, fmt.Sprintf("arguments: %v", err))
	}
	return nil
}

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
}

func echo(p callParams) (map[string]any, error) {
	var args struct {
		Text *string `json:"text"`
	}
	if err := arguments(p, &args); err != nil {
		return nil, err
	}
	if args.Text == nil {
		return nil, fail(codeInvalidParams, "arguments: text is required")
	}
	result := textResult("modern: " + *args.Text)
	result["structuredContent"] = map[string]any{"echoed": *args.Text}
	return result, nil
}

func lookup(p callParams) (map[string]any, error) {
	var args struct {
		Region *string `json:"region"`
	}
	if err := arguments(p, &args); err != nil {
		return nil, err
	}
	if args.Region == nil {
		return nil, fail(codeInvalidParams, "arguments: region is required")
	}
	return textResult("region " + *args.Region), nil
}

// askRequests is what ask needs before it can answer.
const askRequests = `{"colour":{"method":"elicitation/create","params":{"mode":"form",
	"message":"Pick a colour",
	"requestedSchema":{"type":"object","properties":{"colour":{"type":"string"}},"required":["colour"]}}}}`

// ask is a multi round-trip tool: the first call asks for a colour, the
// retry carrying the answer and an issued requestState gets the result.
func (s *server) ask(p callParams) (map[string]any, error) {
	if p.InputResponses == nil {
		state := "state-" + randomHex()
		s.mu.Lock()
		s.states[state] = true
		s.mu.Unlock()
		return map[string]any{
			"resultType":    "input_required",
			"inputRequests": json.RawMessage(askRequests),
			"requestState":  state,
		}, nil
	}
	s.mu.Lock()
	known := s.states[p.RequestState]
	s.mu.Unlock()
	if !known {
		return nil, fail(codeInvalidParams, "unknown requestState")
	}
	raw, ok := p.InputResponses["colour"]
	if !ok {
		return nil, fail(codeInvalidParams, "missing inputResponses colour")
	}
	action, content := elicitAnswer(raw)
	colour := "-"
	if v, ok := content["colour"]; ok {
		colour = plain(v)
	}
	return textResult("answer: " + action + " " + colour), nil
}

// elicitAnswer reads an elicitation result: its action and its content.
func elicitAnswer(raw json.RawMessage) (string, map[string]json.RawMessage) {
	var r struct {
		Action  string                     `json:"action"`
		Content map[string]json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &r) // a malformed answer reads as no action, no content
	return r.Action, r.Content
}

// plain is a JSON value as text: a string's contents, anything else as JSON.
func plain(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// seconds reads the seconds argument of slow and task; absent is 0.
func seconds(p callParams) (float64, error) {
	var args struct {
		Seconds float64 `json:"seconds"`
	}
	if err := arguments(p, &args); err != nil {
		return 0, err
	}
	return args.Seconds, nil
}

// slow sends a progress notification every 100 ms for the given seconds,
// then answers. A request that is cancelled meanwhile (notifications/
// cancelled on stdio, the stream closed on HTTP) is logged and never
// answered.
func (s *server) slow(c *call, p callParams) (map[string]any, error) {
	secs, err := seconds(p)
	if err != nil {
		return nil, err
	}
	steps := int(math.Round(secs * 10))
	c.out.stream()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= steps; i++ {
		select {
		case <-c.ctx.Done():
			s.log.event("cancelled", c.id)
			return nil, errNoReply
		case <-tick.C:
		}
		// Progress is only sent for a token the client gave: there is
		// nothing else it could be matched to.
		if c.meta.progressToken != nil {
			c.out.notify(notification("notifications/progress", map[string]any{
				"progressToken": c.meta.progressToken,
				"progress":      i,
				"total":         steps,
				"message":       fmt.Sprintf("step %d", i),
			}))
		}
	}
	if c.ctx.Err() != nil { // cancelled during the last step
		s.log.event("cancelled", c.id)
		return nil, errNoReply
	}
	return textResult("slow done"), nil
}

func (s *server) resourcesList(*call) (map[string]any, error) {
	return map[string]any{"resources": []any{
		map[string]any{"uri": "modern://note", "name": "note", "mimeType": "text/plain"},
	}}, nil
}

func (s *server) resourcesRead(c *call) (map[string]any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(c.params, &p)
	if p.URI != "modern://note" {
		return nil, fail(codeResourceNotFound, "resource not found")
	}
	return map[string]any{"contents": []any{
		map[string]any{"uri": "modern://note", "mimeType": "text/plain", "text": "a modern note"},
	}}, nil
}

// ---------------------------------------------------------------------------
// Tasks

// task is a task the task tool started. Its state is worked out from the
// clock when it is read, so no goroutine runs it.
type task struct {
	id      string
	seconds float64 // < 0: ask for input after -seconds
	created time.Time

	answered   bool
	action     string
	answeredAt time.Time

	cancelled   bool
	cancelledAt time.Time
}

// taskRequests is what a negative-seconds task asks for.
const taskRequests = `{"ok-1":{"method":"elicitation/create","params":{"mode":"form",
	"message":"Continue the task?",
	"requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}`

// due is when the task stops working.
func (t *task) due() time.Time {
	return t.created.Add(time.Duration(math.Abs(t.seconds) * float64(time.Second)))
}

// state is the task's status, status message and last update at now.
func (t *task) state(now time.Time) (status, message string, updated time.Time) {
	switch {
	case t.cancelled:
		return "cancelled", "cancelled", t.cancelledAt
	case t.answered:
		return "completed", "answered", t.answeredAt
	case now.Before(t.due()):
		elapsed := now.Sub(t.created).Seconds()
		return "working", "working " + strconv.FormatFloat(elapsed, 'f', 1, 64) + "s", t.created
	case t.seconds < 0:
		return "input_required", "waiting for input", t.due()
	default:
		return "completed", "done", t.due()
	}
}

// view is the task object tasks/get returns.
func (t *task) view(now time.Time) map[string]any {
	status, message, updated := t.state(now)
	v := map[string]any{
		"taskId":         t.id,
		"status":         status,
		"statusMessage":  message,
		"createdAt":      t.created.UTC().Format(time.RFC3339),
		"lastUpdatedAt":  updated.UTC().Format(time.RFC3339),
		"ttlMs":          60000,
		"pollIntervalMs": 100,
	}
	switch {
	case status == "input_required":
		v["inputRequests"] = json.RawMessage(taskRequests)
	case status == "completed" && t.answered:
		v["result"] = textResult("task answered: " + t.action)
	case status == "completed":
		v["result"] = textResult("task done")
	}
	return v
}

// startTask is the task tool: it needs the tasks extension, and answers
// with a CreateTaskResult.
func (s *server) startTask(c *call, p callParams) (map[string]any, error) {
	if !c.meta.tasksExt {
		return nil, &rpcError{
			Code:    codeMissingCapability,
			Message: "missing required client capability",
			Data: map[string]any{"requiredCapabilities": map[string]any{
				"extensions": map[string]any{tasksExtension: map[string]any{}},
			}},
			status: http.StatusOK,
		}
	}
	secs, err := seconds(p)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	s.mu.Lock()
	s.lastTask++
	t := &task{id: fmt.Sprintf("task-%d", s.lastTask), seconds: secs, created: now}
	s.tasks[t.id] = t
	s.mu.Unlock()
	stamp := now.UTC().Format(time.RFC3339)
	return map[string]any{
		"resultType":     "task",
		"taskId":         t.id,
		"status":         "working",
		"statusMessage":  "started",
		"createdAt":      stamp,
		"lastUpdatedAt":  stamp,
		"ttlMs":          60000,
		"pollIntervalMs": 100,
	}, nil
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// withTask runs f on the task c names, under the server's lock.
func (s *server) withTask(c *call, f func(t *task, p taskParams) (map[string]any, error)) (map[string]any, error) {
	var p taskParams
	_ = json.Unmarshal(c.params, &p)
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[p.TaskID]
	if !ok {
		return nil, fail(codeInvalidParams, "unknown taskId: "+p.TaskID)
	}
	return f(t, p)
}

func (s *server) tasksGet(c *call) (map[string]any, error) {
	return s.withTask(c, func(t *task, _ taskParams) (map[string]any, error) {
		return t.view(time.Now()), nil
	})
}

// tasksUpdate takes the answer a task in input_required asked for.
func (s *server) tasksUpdate(c *call) (map[string]any, error) {
	return s.withTask(c, func(t *task, p taskParams) (map[string]any, error) {
		now := time.Now()
		if status, _, _ := t.state(now); status != "input_required" {
			return nil, fail(codeInvalidParams, "task "+t.id+" is not waiting for input ("+status+")")
		}
		raw, ok := p.InputResponses["ok-1"]
		if !ok {
			return nil, fail(codeInvalidParams, "missing inputResponses ok-1")
		}
		t.action, _ = elicitAnswer(raw)
		t.answered, t.answeredAt = true, now
		return map[string]any{}, nil
	})
}

func (s *server) tasksCancel(c *call) (map[string]any, error) {
	return s.withTask(c, func(t *task, _ taskParams) (map[string]any, error) {
		if !t.cancelled {
			t.cancelled, t.cancelledAt = true, time.Now()
		}
		s.log.event("task-cancelled", t.id)
		return map[string]any{}, nil
	})
}

// ---------------------------------------------------------------------------
// stdio

// serveStdio reads one message a line until stdin ends, then waits for the
// requests still running so that their replies are not lost.
func (s *server) serveStdio() int {
	out := &stdioConn{w: os.Stdout}
	requests := &inflight{running: map[string]*running{}}
	// The end of stdin ends the subscriptions/listen streams (which would
	// otherwise hold the exit), not the other requests: their replies are
	// still sent.
	eof, atEOF := context.WithCancel(context.Background())
	defer atEOF()
	var wg sync.WaitGroup
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), maxMessage)
	for in.Scan() {
		line := bytes.TrimSpace(in.Bytes())
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			out.reply(errorMessage(nil, fail(codeParse, fmt.Sprintf("parse error: %v", err))), 0)
			continue
		}
		s.log.record(m, nil)
		switch {
		case m.Method == "notifications/cancelled":
			requests.cancel(cancelledID(m.Params))
		case m.isRequest():
			// Registered here, before the goroutine starts, so that a
			// cancel on the next line always finds it.
			parent := context.Background()
			if m.Method == "subscriptions/listen" {
				parent = eof
			}
			ctx, cancel := context.WithCancel(parent)
			key := idKey(m.ID)
			r := requests.add(key, cancel)
			c := &call{ctx: ctx, id: m.ID, method: m.Method, params: m.Params, meta: parseMeta(m.Params), out: out}
			wg.Go(func() {
				defer requests.done(key, r)
				s.dispatch(c)
			})
		}
	}
	atEOF()
	wg.Wait()
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "modernserver: stdin: %v\n", err)
		return 1
	}
	return 0
}

// stdioConn writes whole lines to stdout, one at a time.
type stdioConn struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *stdioConn) write(raw []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.w.Write(append(raw, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "modernserver: stdout: %v\n", err)
	}
}

func (o *stdioConn) stream()                 {}
func (o *stdioConn) notify(raw []byte)       { o.write(raw) }
func (o *stdioConn) reply(raw []byte, _ int) { o.write(raw) }

// inflight maps the ids of running stdio requests to their cancels.
type inflight struct {
	mu      sync.Mutex
	running map[string]*running
}

// running is one entry of inflight; its pointer tells a request from a
// later one that reused its id.
type running struct{ cancel context.CancelFunc }

func (f *inflight) add(key string, cancel context.CancelFunc) *running {
	r := &running{cancel: cancel}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running[key] = r
	return r
}

func (f *inflight) cancel(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.running[key]; ok {
		r.cancel()
	}
}

// done forgets a finished request, unless a later request reused its id.
func (f *inflight) done(key string, r *running) {
	r.cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[key] == r {
		delete(f.running, key)
	}
}

// idKey is an id in compact JSON, so that 1 and "1" differ but spacing
// does not.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// cancelledID is the key of the request a notifications/cancelled names.
func cancelledID(params json.RawMessage) string {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(params, &p)
	return idKey(p.RequestID)
}

// ---------------------------------------------------------------------------
// HTTP

// serveHTTP serves POST /mcp on addr until SIGINT or SIGTERM.
func (s *server) serveHTTP(addr string) int {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", s.serveMCP)
	return fixturehttp.Serve("modernserver", addr, mux)
}

// serveMCP takes one JSON-RPC message and answers it in the response.
func (s *server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMessage))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "body over 4 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	out := &httpConn{w: w}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		out.reply(errorMessage(nil, fail(codeParse, fmt.Sprintf("parse error: %v", err))), http.StatusBadRequest)
		return
	}
	s.log.record(m, r.Header)
	if !m.isRequest() {
		w.WriteHeader(http.StatusAccepted) // a notification (or a stray reply)
		return
	}
	s.dispatch(&call{
		ctx:    r.Context(), // ends when the client closes the stream
		id:     m.ID,
		method: m.Method,
		params: m.Params,
		meta:   parseMeta(m.Params),
		header: r.Header,
		out:    out,
	})
}

// httpConn is one POST's response: application/json for a lone reply, or
// an event stream once stream is called.
type httpConn struct {
	mu  sync.Mutex // a listener's notifications come from other requests' goroutines
	w   http.ResponseWriter
	sse bool
}

func (h *httpConn) stream() {
	h.sse = true
	h.w.Header().Set("Content-Type", "text/event-stream")
	h.w.Header().Set("Cache-Control", "no-cache")
	h.w.WriteHeader(http.StatusOK)
	h.flush() // the client sees the stream open before the first event
}

// event writes one SSE event and flushes it. A failed write is left to the
// request's context: the client is gone, and slow notices that.
func (h *httpConn) event(raw []byte) {
	_, _ = fmt.Fprintf(h.w, "event: message\ndata: %s\n\n", raw)
	h.flush()
}

func (h *httpConn) flush() { _ = http.NewResponseController(h.w).Flush() }

func (h *httpConn) notify(raw []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.sse {
		h.stream()
	}
	h.event(raw)
}

func (h *httpConn) reply(raw []byte, status int) {
	if h.sse {
		h.event(raw)
		return
	}
	h.w.Header().Set("Content-Type", "application/json")
	h.w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	h.w.WriteHeader(status)
	_, _ = h.w.Write(raw)
}
