package tests

// Bad input on every surface: raw MCP lines on stdin (§4.3, VAL-*, RES-2,
// MCP-5), every MCP_BRIDGE_* variable with an invalid value (CLI-1, §14),
// and malformed config files and entries (CFG-1).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// rawBridge is `bridge run` driven with raw bytes on stdin; every stdout
// line is kept for the final frame check.
type rawBridge struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *syncBuffer
	done   chan struct{}

	mu  sync.Mutex
	all [][]byte
}

func startRawBridge(t *testing.T, extra map[string]string) *rawBridge {
	t.Helper()
	rb := &rawBridge{t: t, lines: make(chan []byte, 4096), stderr: &syncBuffer{}, done: make(chan struct{})}
	rb.cmd = exec.Command(bridgeBin, "run")
	rb.cmd.Env = baseEnv(t, extra)
	rb.cmd.Stderr = rb.stderr
	var err error
	if rb.stdin, err = rb.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := rb.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := rb.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(rb.done)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				rb.mu.Lock()
				rb.all = append(rb.all, line)
				rb.mu.Unlock()
				rb.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(rb.close)
	rb.send([]byte(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"badinput","version":"1"}}}`))
	if _, ok := rb.until(`"init"`, 10*time.Second); !ok {
		t.Fatalf("no initialize response\nstderr:\n%s", tail(rb.stderr.String(), 4000))
	}
	rb.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return rb
}

// close ends stdin, waits for a clean exit (LIF-1) and checks that no
// container is left.
func (rb *rawBridge) close() {
	rb.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- rb.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			rb.t.Errorf("bridge exit after stdin EOF: %v", err)
		}
	case <-time.After(15 * time.Second):
		rb.t.Errorf("bridge still running 15 s after stdin EOF")
		_ = rb.cmd.Process.Kill()
		<-exited
	}
	<-rb.done
	if testRuntime() != "local" {
		assertNoContainers(rb.t, rb.cmd.Process.Pid)
	}
	if rb.t.Failed() {
		rb.t.Logf("bridge stderr:\n%s", tail(rb.stderr.String(), 6000))
	}
}

// send writes raw and a newline unless raw ends with one.
func (rb *rawBridge) send(raw []byte) {
	rb.t.Helper()
	if !bytes.HasSuffix(raw, []byte("\n")) {
		raw = append(append([]byte(nil), raw...), '\n')
	}
	if _, err := rb.stdin.Write(raw); err != nil {
		rb.t.Fatalf("write to the bridge: %v", err)
	}
}

// rawMsg is one decoded stdout line.
type rawMsg struct {
	line   []byte
	fields map[string]json.RawMessage
}

func (m rawMsg) id() string { return string(m.fields["id"]) }

// until reads messages up to and including the response whose id is the
// JSON text id; it returns them all.
func (rb *rawBridge) until(id string, d time.Duration) ([]rawMsg, bool) {
	var out []rawMsg
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case line := <-rb.lines:
			m := rawMsg{line: line}
			_ = json.Unmarshal(line, &m.fields)
			out = append(out, m)
			if m.fields != nil && m.id() == id {
				return out, true
			}
		case <-timer.C:
			return out, false
		}
	}
}

// badCase is one raw line and its expected answer.
type badCase struct {
	name string
	raw  []byte
	// id is the JSON text of the request id whose response to wait for;
	// "" when the line gets no response or one with a null id.
	id    string
	check func(t *testing.T, msgs []rawMsg)
}

// wantRPCError expects exactly one message: a JSON-RPC error with code, the
// case's id (null when id is ""), and a message starting with msg.
func wantRPCError(id string, code int, msg string) func(*testing.T, []rawMsg) {
	return func(t *testing.T, msgs []rawMsg) {
		t.Helper()
		if id == "" {
			id = "null"
		}
		if len(msgs) != 1 {
			t.Errorf("got %d messages, want one error response: %s", len(msgs), msgLines(msgs))
			return
		}
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		m := msgs[0]
		if m.id() != id || json.Unmarshal(m.fields["error"], &e) != nil || e.Code != code || !strings.HasPrefix(e.Message, msg) {
			t.Errorf("got %s\nwant an error with id %s, code %d, message starting %q", m.line, id, code, msg)
		}
	}
}

// wantTool expects exactly one message: a tool result with the case's id,
// isError, structuredContent.status and .error as given.
func wantTool(id, status string, errTexts ...string) func(*testing.T, []rawMsg) {
	return func(t *testing.T, msgs []rawMsg) {
		t.Helper()
		if len(msgs) != 1 {
			t.Errorf("got %d messages, want one tool result: %s", len(msgs), msgLines(msgs))
			return
		}
		var r struct {
			IsError    bool `json:"isError"`
			Structured struct {
				Status string `json:"status"`
				Error  string `json:"error"`
			} `json:"structuredContent"`
		}
		m := msgs[0]
		if m.id() != id || json.Unmarshal(m.fields["result"], &r) != nil || !r.IsError ||
			r.Structured.Status != status || !slices.Contains(errTexts, r.Structured.Error) {
			t.Errorf("got %s\nwant a tool result with id %s, isError, status %q, error one of %q", m.line, id, status, errTexts)
		}
	}
}

// wantText expects exactly one message: a successful tool result whose
// content[0].text is text.
func wantText(id, text string) func(*testing.T, []rawMsg) {
	return func(t *testing.T, msgs []rawMsg) {
		t.Helper()
		if len(msgs) != 1 {
			t.Errorf("got %d messages, want one tool result: %s", len(msgs), msgLines(msgs))
			return
		}
		var r struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		m := msgs[0]
		if m.id() != id || json.Unmarshal(m.fields["result"], &r) != nil || r.IsError || len(r.Content) == 0 || r.Content[0].Text != text {
			t.Errorf("got %s\nwant a successful tool result with id %s and text %q", tail(string(m.line), 2000), id, text)
		}
	}
}

// wantResult expects exactly one successful response with the case's id
// whose result is the JSON text result.
func wantResult(id, result string) func(*testing.T, []rawMsg) {
	return func(t *testing.T, msgs []rawMsg) {
		t.Helper()
		if len(msgs) != 1 || msgs[0].id() != id || string(msgs[0].fields["result"]) != result {
			t.Errorf("got %s\nwant a response with id %s and result %s", msgLines(msgs), id, result)
		}
	}
}

// wantNothing expects no message at all.
func wantNothing(t *testing.T, msgs []rawMsg) {
	t.Helper()
	if len(msgs) != 0 {
		t.Errorf("got %s, want no response", msgLines(msgs))
	}
}

func msgLines(msgs []rawMsg) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(tail(string(m.line), 500))
	}
	return b.String()
}

// badCall is a tools/call of run_python with id and raw JSON arguments.
func badCall(id, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"run_python","arguments":` + args + `}}`)
}

// TestBadInputStdio sends raw bad MCP lines to `bridge run` and checks each
// exact answer; after every case a ping must be answered, and every line
// the bridge wrote to stdout must be a JSON-RPC message (MCP-5).
func TestBadInputStdio(t *testing.T) {
	requirePodman(t)
	cfg := t.TempDir()
	writeJSON(t, filepath.Join(cfg, "servers.json"), map[string]any{"mcpServers": map[string]any{"demo": fake()}})
	rb := startRawBridge(t, map[string]string{
		"MCP_BRIDGE_CONFIG_DIR": cfg, "MCP_BRIDGE_MAX_FRAME_BYTES": "1048576", "MCP_BRIDGE_MAX_TIMEOUT": "60",
	})
	const (
		missingCode = "Missing 'code' argument"
		notList     = "'servers' must be a list"
		notStrings  = "'servers' must be a list of strings"
		notInt      = "'timeout' must be an integer"
		outOfRange  = "'timeout' must be between 1 and 60 seconds"
		badSession  = "'session' must be 1-64 characters from A-Z a-z 0-9 _ . -"
		validation  = "validation_error"
	)
	bigCode := "#" + strings.Repeat("x", 1_000_000) + "\nprint('big ok')"
	hugeCode := strings.Repeat("#", 1572864-len("\nprint(1)")) + "\nprint(1)"
	cases := []badCase{
		// Not JSON, or not a JSON-RPC object.
		{"truncated object", []byte(`{`), "", wantRPCError("", -32700, "Parse error")},
		{"plain text", []byte(`not json at all`), "", wantRPCError("", -32700, "Parse error")},
		{"unterminated request", []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"`), "", wantRPCError("", -32700, "Parse error")},
		{"blank line", []byte("\n"), "", wantRPCError("", -32700, "Parse error")},
		{"whitespace line", []byte(" \t  \r"), "", wantRPCError("", -32700, "Parse error")},
		{"invalid UTF-8 bytes", []byte("\xff\xfe\xfd"), "", wantRPCError("", -32700, "Parse error")},
		{"NUL byte inside JSON", []byte("{\"jsonrpc\":\"2.0\",\"id\":\"nul\",\"method\":\"ping\",\"x\":\x00}"), "", wantRPCError("", -32700, "Parse error")},
		{"2 MB of garbage", bytes.Repeat([]byte("x"), 2<<20), "", wantRPCError("", -32700, "Parse error")},
		{"array nested 100,000 deep", []byte(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)), "", wantRPCError("", -32700, "Parse error")},
		{"request nested 100,000 deep", []byte(`{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"x":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}}`), "", wantRPCError("", -32700, "Parse error")},
		{"empty array", []byte(`[]`), "", wantRPCError("", -32700, "Failed to parse message")},
		{"batch array", []byte(`[{"jsonrpc":"2.0","id":"b1","method":"ping"}]`), "", wantRPCError("", -32700, "Failed to parse message")},
		{"bare number", []byte(`42`), "", wantRPCError("", -32700, "Failed to parse message")},
		{"bare string", []byte(`"ping"`), "", wantRPCError("", -32700, "Failed to parse message")},
		{"bare true", []byte(`true`), "", wantRPCError("", -32700, "Failed to parse message")},
		{"bare null", []byte(`null`), "", wantRPCError("", -32600, "Invalid JSON-RPC version")},
		{"empty object", []byte(`{}`), "", wantRPCError("", -32600, "Invalid JSON-RPC version")},
		{"method not a string", []byte(`{"jsonrpc":"2.0","id":"m5","method":5}`), "", wantRPCError("", -32700, "Failed to parse message")},
		// JSON-RPC envelope problems.
		{"no jsonrpc member", []byte(`{"id":"nov","method":"ping"}`), `"nov"`, wantRPCError(`"nov"`, -32600, "Invalid JSON-RPC version")},
		{"jsonrpc 1.0", []byte(`{"jsonrpc":"1.0","id":"v1","method":"ping"}`), `"v1"`, wantRPCError(`"v1"`, -32600, "Invalid JSON-RPC version")},
		{"unknown method", []byte(`{"jsonrpc":"2.0","id":"um","method":"no/such/method"}`), `"um"`, wantRPCError(`"um"`, -32601, "Method no/such/method not found")},
		{"invalid UTF-8 in the method", []byte("{\"jsonrpc\":\"2.0\",\"id\":\"u8\",\"method\":\"pi\xffng\"}"), `"u8"`, wantRPCError(`"u8"`, -32601, "Method pi\uFFFDng not found")},
		{"prompts/list (no prompts capability)", []byte(`{"jsonrpc":"2.0","id":"pl","method":"prompts/list"}`), `"pl"`, wantRPCError(`"pl"`, -32601, "prompts not supported")},
		{"resources/subscribe (subscribe:false)", []byte(`{"jsonrpc":"2.0","id":"rs","method":"resources/subscribe","params":{"uri":"resource://mcp-server-code-execution-mode/capabilities"}}`), `"rs"`, wantRPCError(`"rs"`, -32601, "resources subscribe not supported")},
		{"ping with array params", []byte(`{"jsonrpc":"2.0","id":"pa","method":"ping","params":[1]}`), `"pa"`, wantRPCError(`"pa"`, -32600, "unparsable ping request")},
		{"tools/list with a numeric cursor", []byte(`{"jsonrpc":"2.0","id":"tc","method":"tools/list","params":{"cursor":5}}`), `"tc"`, wantRPCError(`"tc"`, -32600, "unparsable tools/list request")},
		{"unknown notification", []byte(`{"jsonrpc":"2.0","method":"no/such/notification"}`), "", wantNothing},
		{"request with a null id", []byte(`{"jsonrpc":"2.0","id":null,"method":"ping"}`), "", wantNothing},
		{"response to nothing", []byte(`{"jsonrpc":"2.0","id":"r0","result":{}}`), "", wantNothing},
		{"cancel of an unknown request", []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}`), "", wantNothing},
		{"second initialized notification", []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), "", wantNothing},
		// tools/call envelope.
		{"tools/call without params", []byte(`{"jsonrpc":"2.0","id":"np","method":"tools/call"}`), `"np"`, wantRPCError(`"np"`, -32602, "tool '' not found")},
		{"tools/call with numeric params", []byte(`{"jsonrpc":"2.0","id":"nn","method":"tools/call","params":5}`), `"nn"`, wantRPCError(`"nn"`, -32600, "unparsable tools/call request")},
		{"tools/call with a numeric name", []byte(`{"jsonrpc":"2.0","id":"nm","method":"tools/call","params":{"name":5,"arguments":{}}}`), `"nm"`, wantRPCError(`"nm"`, -32600, "unparsable tools/call request")},
		{"unknown tool", []byte(`{"jsonrpc":"2.0","id":"ut","method":"tools/call","params":{"name":"nope","arguments":{"code":"1"}}}`), `"ut"`, wantRPCError(`"ut"`, -32602, "tool 'nope' not found")},
		{"tool name in the wrong case", []byte(`{"jsonrpc":"2.0","id":"uc","method":"tools/call","params":{"name":"RUN_PYTHON","arguments":{"code":"1"}}}`), `"uc"`, wantRPCError(`"uc"`, -32602, "tool 'RUN_PYTHON' not found")},
		// resources/read.
		{"unknown resource URI", []byte(`{"jsonrpc":"2.0","id":"ru","method":"resources/read","params":{"uri":"resource://nope"}}`), `"ru"`, wantRPCError(`"ru"`, -32002, "handler not found for resource URI 'resource://nope'")},
		{"resources/read without a URI", []byte(`{"jsonrpc":"2.0","id":"rn","method":"resources/read","params":{}}`), `"rn"`, wantRPCError(`"rn"`, -32002, "handler not found for resource URI ''")},
		{"resources/read with a numeric URI", []byte(`{"jsonrpc":"2.0","id":"ri","method":"resources/read","params":{"uri":5}}`), `"ri"`, wantRPCError(`"ri"`, -32600, "unparsable resources/read request")},
		// Arguments that are not an object.
		{"arguments array", badCall(`"a1"`, `[1,2]`), `"a1"`, wantTool(`"a1"`, validation, missingCode)},
		{"arguments string", badCall(`"a2"`, `"print(1)"`), `"a2"`, wantTool(`"a2"`, validation, missingCode)},
		{"arguments number", badCall(`"a3"`, `5`), `"a3"`, wantTool(`"a3"`, validation, missingCode)},
		{"arguments null", badCall(`"a4"`, `null`), `"a4"`, wantTool(`"a4"`, validation, missingCode)},
		{"arguments absent", []byte(`{"jsonrpc":"2.0","id":"a5","method":"tools/call","params":{"name":"run_python"}}`), `"a5"`, wantTool(`"a5"`, validation, missingCode)},
		// code.
		{"code missing", badCall(`"c1"`, `{}`), `"c1"`, wantTool(`"c1"`, validation, missingCode)},
		{"code empty", badCall(`"c2"`, `{"code":""}`), `"c2"`, wantTool(`"c2"`, validation, missingCode)},
		{"code whitespace", badCall(`"c3"`, `{"code":" \n\t "}`), `"c3"`, wantTool(`"c3"`, validation, missingCode)},
		{"code number", badCall(`"c4"`, `{"code":5}`), `"c4"`, wantTool(`"c4"`, validation, missingCode)},
		{"code array", badCall(`"c5"`, `{"code":["print(1)"]}`), `"c5"`, wantTool(`"c5"`, validation, missingCode)},
		{"code object", badCall(`"c6"`, `{"code":{"src":"print(1)"}}`), `"c6"`, wantTool(`"c6"`, validation, missingCode)},
		{"code null", badCall(`"c7"`, `{"code":null}`), `"c7"`, wantTool(`"c7"`, validation, missingCode)},
		{"code over the frame cap", badCall(`"c8"`, `{"code":`+jsonQuote(hugeCode)+`}`), `"c8"`, wantTool(`"c8"`, validation, "'code' is 1572864 bytes; the limit is 1048576 bytes")},
		{"code of 1 MB runs", badCall(`"c9"`, `{"code":`+jsonQuote(bigCode)+`,"timeout":30}`), `"c9"`, wantText(`"c9"`, "big ok")},
		{"code with invalid UTF-8", []byte("{\"jsonrpc\":\"2.0\",\"id\":\"c10\",\"method\":\"tools/call\",\"params\":{\"name\":\"run_python\",\"arguments\":{\"code\":\"print('\xff\xfe')\"}}}"), `"c10"`, wantText(`"c10"`, "\uFFFD\uFFFD")},
		{"code with a lone surrogate escape", badCall(`"c11"`, `{"code":"print(\"\ud800\")"}`), `"c11"`, wantText(`"c11"`, "\uFFFD")},
		{"code with a NUL character", badCall(`"c12"`, `{"code":"print(\"a\u0000b\")"}`), `"c12"`, wantTool(`"c12"`, "error",
			"ValueError: source code string cannot contain null bytes",    // Python 3.11
			"SyntaxError: source code string cannot contain null bytes")}, // 3.12 and later,
		// servers.
		{"servers string", badCall(`"s1"`, `{"code":"1","servers":"demo"}`), `"s1"`, wantTool(`"s1"`, validation, notList)},
		{"servers number", badCall(`"s2"`, `{"code":"1","servers":5}`), `"s2"`, wantTool(`"s2"`, validation, notList)},
		{"servers object", badCall(`"s3"`, `{"code":"1","servers":{"demo":true}}`), `"s3"`, wantTool(`"s3"`, validation, notList)},
		{"servers list of numbers", badCall(`"s4"`, `{"code":"1","servers":[1,2]}`), `"s4"`, wantTool(`"s4"`, validation, notStrings)},
		{"servers with a nested list", badCall(`"s5"`, `{"code":"1","servers":[["demo"]]}`), `"s5"`, wantTool(`"s5"`, validation, notStrings)},
		{"servers mixed", badCall(`"s6"`, `{"code":"1","servers":["demo",5]}`), `"s6"`, wantTool(`"s6"`, validation, notStrings)},
		{"servers unknown", badCall(`"s7"`, `{"code":"print('ran')","servers":["nope"]}`), `"s7"`, wantTool(`"s7"`, "error", "Unknown MCP server: nope. Known servers: demo.")},
		{"servers close to a known one", badCall(`"s8"`, `{"code":"print('ran')","servers":["dem"]}`), `"s8"`, wantTool(`"s8"`, "error", "Unknown MCP server: dem; did you mean 'demo'? Known servers: demo.")},
		{"servers known then unknown", badCall(`"s9"`, `{"code":"print('ran')","servers":["demo","nope"]}`), `"s9"`, wantTool(`"s9"`, "error", "Unknown MCP server: nope. Known servers: demo.")},
		{"servers empty name", badCall(`"s10"`, `{"code":"print('ran')","servers":[""]}`), `"s10"`, wantTool(`"s10"`, "error", "Unknown MCP server: . Known servers: demo.")},
		{"servers duplicates dropped", badCall(`"s11"`, `{"code":"print(LOADED_MCP_SERVERS)","servers":["demo","demo"]}`), `"s11"`, wantText(`"s11"`, "('demo',)")},
		// timeout.
		{"timeout string", badCall(`"t1"`, `{"code":"1","timeout":"5"}`), `"t1"`, wantTool(`"t1"`, validation, notInt)},
		{"timeout float", badCall(`"t2"`, `{"code":"1","timeout":2.5}`), `"t2"`, wantTool(`"t2"`, validation, notInt)},
		{"timeout integral float", badCall(`"t3"`, `{"code":"1","timeout":5.0}`), `"t3"`, wantTool(`"t3"`, validation, notInt)},
		{"timeout exponent", badCall(`"t4"`, `{"code":"1","timeout":1e2}`), `"t4"`, wantTool(`"t4"`, validation, notInt)},
		{"timeout bool", badCall(`"t5"`, `{"code":"1","timeout":true}`), `"t5"`, wantTool(`"t5"`, validation, notInt)},
		{"timeout list", badCall(`"t6"`, `{"code":"1","timeout":[5]}`), `"t6"`, wantTool(`"t6"`, validation, notInt)},
		{"timeout object", badCall(`"t7"`, `{"code":"1","timeout":{}}`), `"t7"`, wantTool(`"t7"`, validation, notInt)},
		{"timeout zero", badCall(`"t8"`, `{"code":"1","timeout":0}`), `"t8"`, wantTool(`"t8"`, validation, outOfRange)},
		{"timeout negative", badCall(`"t9"`, `{"code":"1","timeout":-1}`), `"t9"`, wantTool(`"t9"`, validation, outOfRange)},
		{"timeout hugely negative", badCall(`"t10"`, `{"code":"1","timeout":-99999999999999999999999}`), `"t10"`, wantTool(`"t10"`, validation, outOfRange)},
		{"timeout huge is clamped", badCall(`"t11"`, `{"code":"print(1)","timeout":99999999999999999999999}`), `"t11"`, wantText(`"t11"`, "1\nnote: timeout clamped to 60s (MCP_BRIDGE_MAX_TIMEOUT)")},
		// session.
		{"session with a space", badCall(`"e1"`, `{"code":"1","session":"a b"}`), `"e1"`, wantTool(`"e1"`, validation, badSession)},
		{"session empty", badCall(`"e2"`, `{"code":"1","session":""}`), `"e2"`, wantTool(`"e2"`, validation, badSession)},
		{"session 65 characters", badCall(`"e3"`, `{"code":"1","session":"`+strings.Repeat("s", 65)+`"}`), `"e3"`, wantTool(`"e3"`, validation, badSession)},
		{"session path traversal", badCall(`"e4"`, `{"code":"1","session":"../etc"}`), `"e4"`, wantTool(`"e4"`, validation, badSession)},
		{"session non-ASCII", badCall(`"e5"`, `{"code":"1","session":"caf\u00e9"}`), `"e5"`, wantTool(`"e5"`, validation, badSession)},
		{"session number", badCall(`"e6"`, `{"code":"1","session":5}`), `"e6"`, wantTool(`"e6"`, validation, badSession)},
		{"session list", badCall(`"e7"`, `{"code":"1","session":["a"]}`), `"e7"`, wantTool(`"e7"`, validation, badSession)},
		{"session invalid UTF-8", []byte("{\"jsonrpc\":\"2.0\",\"id\":\"e8\",\"method\":\"tools/call\",\"params\":{\"name\":\"run_python\",\"arguments\":{\"code\":\"1\",\"session\":\"a\xff\"}}}"), `"e8"`, wantTool(`"e8"`, validation, badSession)},
		{"session 64 characters works", badCall(`"e9"`, `{"code":"print('ok')","session":"`+strings.Repeat("s", 64)+`"}`), `"e9"`, wantText(`"e9"`, "ok")},
		// The first failing check wins (§4.3 order).
		{"code and servers both bad", badCall(`"o1"`, `{"code":5,"servers":"x"}`), `"o1"`, wantTool(`"o1"`, validation, missingCode)},
		{"servers and timeout both bad", badCall(`"o2"`, `{"code":"1","servers":[1],"timeout":"x"}`), `"o2"`, wantTool(`"o2"`, validation, notStrings)},
		{"timeout and session both bad", badCall(`"o3"`, `{"code":"1","timeout":0,"session":"a b"}`), `"o3"`, wantTool(`"o3"`, validation, outOfRange)},
		{"unknown argument keys ignored, and named", badCall(`"o4"`, `{"code":"print('x')","extra":1}`), `"o4"`,
			wantText(`"o4"`, "x\nnote: ignored argument 'extra': run_python takes only code, servers, timeout, session")},
		// Still a working server.
		{"valid ping", []byte(`{"jsonrpc":"2.0","id":"ok","method":"ping"}`), `"ok"`, wantResult(`"ok"`, `{}`)},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	start := time.Now()
	for i, c := range cases {
		caseStart := time.Now()
		rb.send(c.raw)
		var msgs []rawMsg
		if c.id != "" {
			got, ok := rb.until(c.id, 60*time.Second)
			if !ok {
				t.Errorf("%s: no response with id %s within 60 s (got %s)", c.name, c.id, msgLines(got))
			}
			msgs = got
		}
		pingID := fmt.Sprintf(`"ping-%d"`, i)
		rb.send([]byte(`{"jsonrpc":"2.0","id":` + pingID + `,"method":"ping"}`))
		got, ok := rb.until(pingID, 30*time.Second)
		if !ok {
			t.Fatalf("%s: the bridge stopped answering ping (got %s)", c.name, msgLines(got))
		}
		if pong := got[len(got)-1]; string(pong.fields["result"]) != "{}" {
			t.Errorf("%s: ping answered %s", c.name, pong.line)
		}
		msgs = append(msgs, got[:len(got)-1]...)
		t.Run(c.name, func(t *testing.T) { c.check(t, msgs) })
		if d := time.Since(caseStart); d > 5*time.Second {
			t.Logf("%s took %v", c.name, d.Round(time.Millisecond))
		}
	}
	t.Logf("%d bad inputs in %v", len(cases), time.Since(start).Round(time.Millisecond))

	// Every stdout line is one JSON-RPC 2.0 message: valid UTF-8, an
	// object with jsonrpc "2.0", and either a method or an id with exactly
	// one of result and error; ids are strings, numbers or null.
	rb.mu.Lock()
	all := append([][]byte(nil), rb.all...)
	rb.mu.Unlock()
	for _, line := range all {
		var m map[string]json.RawMessage
		ok := utf8.Valid(line) && bytes.HasSuffix(line, []byte("\n")) && json.Unmarshal(line, &m) == nil && string(m["jsonrpc"]) == `"2.0"`
		if ok {
			_, hasMethod := m["method"]
			_, hasResult := m["result"]
			_, hasError := m["error"]
			id, hasID := m["id"]
			switch {
			case hasMethod:
			case hasID && hasResult != hasError:
				ok = len(id) > 0 && (id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9') || string(id) == "null")
			default:
				ok = false
			}
		}
		if !ok {
			t.Errorf("stdout line is not a JSON-RPC message: %q", tail(string(line), 300))
		}
	}
	if len(all) < len(cases) {
		t.Errorf("only %d stdout lines for %d cases", len(all), len(cases))
	}
}

// badEnvValues are invalid values of every variable of README's env table.
// A variable whose valid values are "any path" has no invalid value; it is
// listed in anyValueEnv instead, with the reason.
var badEnvValues = map[string][]string{
	"MCP_BRIDGE_RUNTIME":              {"-rm", "--privileged", "local"}, // local needs MCP_BRIDGE_UNSAFE_LOCAL=1
	"MCP_BRIDGE_IMAGE":                {"--privileged", "-v"},
	"MCP_BRIDGE_TIMEOUT":              {"abc", "0", "121", "-5", "1.5", "30s"},
	"MCP_BRIDGE_MAX_TIMEOUT":          {"0", "86401", "x", "-1"},
	"MCP_BRIDGE_MEMORY":               {"lots", "16m", "31m", "512mb", "-1", "1t", "99999999999999999999g"},
	"MCP_BRIDGE_PIDS":                 {"7", "0", "x", "-1", "1.5"},
	"MCP_BRIDGE_CPUS":                 {"0", "-1", "abc", "1e3", "0.0", "1,5"},
	"MCP_BRIDGE_CONTAINER_USER":       {"-1", "root:-g", "a b", "user:", ":group"},
	"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": {"x", "1.5", "5m"},
	"MCP_BRIDGE_ALLOW_SELF_SERVER":    {"maybe", "2", "y"},
	"MCP_BRIDGE_OUTPUT_MODE":          {"tooon", "yaml", "text"},
	"MCP_BRIDGE_LOG_FORMAT":           {"yaml", "pretty"},
	"MCP_BRIDGE_SECCOMP":              {"relative.json"},
	"MCP_BRIDGE_LOG_LEVEL":            {"verbose", "10", "fatal!"},
	"MCP_BRIDGE_OCI_RUNTIME":          {"-x", "--root=/"},
	"MCP_BRIDGE_MAX_OUTPUT_BYTES":     {"1023", "x", "16777217", "-1"},
	"MCP_BRIDGE_MAX_FRAME_BYTES":      {"1048575", "x", "0", "-1"},
	"MCP_BRIDGE_CALL_TIMEOUT":         {"0", "86401", "x"},
	"MCP_BRIDGE_APPROVAL_TIMEOUT":     {"0", "86401", "x"},
	"MCP_BRIDGE_START_TIMEOUT":        {"0", "601", "x"},
	"MCP_BRIDGE_MAX_SESSIONS":         {"0", "513", "x"},
	"MCP_BRIDGE_UNSAFE_LOCAL":         {"maybe", "2"},
	"MCP_BRIDGE_SERVER_IDLE_TIMEOUT":  {"x", "1.5"},
	"MCP_BRIDGE_MAX_IMAGES":           {"-1", "101", "x"},
	"MCP_BRIDGE_MAX_IMAGE_BYTES":      {"1023", "99999999", "1m"},
	"MCP_BRIDGE_MOUNTS":               {"relative:/data", "/:/data", "/tmp:/etc", "/tmp:/data:rx", "/nonexistent-bridge:/data"},

	"MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES": {"1023", "x", "268435457"},
	"MCP_BRIDGE_MEMORY_MAX_TOTAL_BYTES": {"1000", "x"},
	"MCP_BRIDGE_MEMORY_MAX_KEYS":        {"0", "x", "-1", "1000001"},
	"MCP_BRIDGE_CONFIG_SOURCES":         {"cursor,nope", "home"},
	"MCP_BRIDGE_PROJECT_SERVERS":        {"yes", "trusted"},
	"MCP_BRIDGE_STRUCTURED":             {"sometimes", "true"},
	"MCP_BRIDGE_LINK":                   {"pipe", "socket"},
	"MCP_BRIDGE_ALWAYS_LOAD":            {"maybe", "2"},
	"MCP_BRIDGE_TOOL_INVENTORY":         {"all", "names,descriptions"},

	"MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL": {"0", "513", "x"},
	"MCP_BRIDGE_MAX_IDENTITY_CONNS":         {"0", "4097", "x"},
	"MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL":    {"0", "513", "x"},
	"MCP_BRIDGE_MAX_CONNS_PER_ADDR":         {"-1", "65537", "x"},
	"MCP_BRIDGE_SESSION_DURABILITY":         {"always", "on"},
	"MCP_BRIDGE_SNAPSHOT_MAX":               {"1k", "x", "-1"},
	"MCP_BRIDGE_SNAPSHOT_TOTAL":             {"x", "2k"},
	"MCP_BRIDGE_SNAPSHOT_RETENTION":         {"forever", "30s", "-1d"},
	"MCP_BRIDGE_KEY_FILE":                   {"relative/key"},
	"MCP_BRIDGE_AUDIT":                      {"maybe", "2"},
	"MCP_BRIDGE_AUDIT_CODE":                 {"none"},
	"MCP_BRIDGE_AUDIT_MAX_FILE_BYTES":       {"1k", "x"},
	"MCP_BRIDGE_AUDIT_RETENTION":            {"forever", "-1d"},
	"MCP_BRIDGE_TRACE_VALUES":               {"maybe"},

	"MCP_BRIDGE_K8S_NAMESPACE":       {"Sandboxes", "-x", "a_b"},
	"MCP_BRIDGE_K8S_PULL_POLICY":     {"sometimes", "-x"},
	"MCP_BRIDGE_K8S_WARM_POOL":       {"-1", "17", "x"},
	"MCP_BRIDGE_K8S_RUNTIME_CLASS":   {"g_visor", "-x"},
	"MCP_BRIDGE_K8S_NODE_NAME":       {"node 1", "-x"},
	"MCP_BRIDGE_K8S_SECCOMP_PROFILE": {"/etc/profile.json", "-x"},
}

var anyValueEnv = map[string]string{
	"MCP_BRIDGE_STATE_DIR":   "a directory; any path is accepted at startup",
	"MCP_BRIDGE_TOKENS_FILE": "a file path read by bridge serve only, which refuses a bad file with one line and exit 2 (TestServeBadInvocation)",
	"MCP_BRIDGE_CONFIG_DIR":  "a directory; a missing one is waited for, not an error",
	"MCP_SERVERS_CONFIG":     "a file path; an unreadable file is a skipped config (CFG-1), not an error",
}

// readmeEnvVars lists the variables of README's env table, in order.
func readmeEnvVars(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "## Environment variables")
	if i < 0 {
		t.Fatal("README has no Environment variables section")
	}
	s = s[i+3:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var vars []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(MCP_[A-Z0-9_]+)` \\|").FindAllStringSubmatch(s, -1) {
		vars = append(vars, m[1])
	}
	if len(vars) < 20 {
		t.Fatalf("README's env table lists only %d variables", len(vars))
	}
	return vars
}

// TestBadEnvValues checks CLI-1 for every variable of README's table: an
// invalid value exits 2 with exactly one stderr line naming the variable
// and the value, and nothing on stdout.
func TestBadEnvValues(t *testing.T) {
	vars := readmeEnvVars(t)
	inREADME := map[string]bool{}
	for _, v := range vars {
		inREADME[v] = true
		_, bad := badEnvValues[v]
		_, free := anyValueEnv[v]
		if !bad && !free {
			t.Errorf("README lists %s, but this test has no invalid value for it: add one to badEnvValues", v)
		}
	}
	for v := range badEnvValues {
		if !inREADME[v] {
			t.Errorf("badEnvValues has %s, which README's env table does not list", v)
		}
	}
	n := 0
	for _, v := range vars {
		for _, val := range badEnvValues[v] {
			n++
			env := map[string]string{v: val}
			if v == "MCP_BRIDGE_RUNTIME" && val == "local" {
				env["MCP_BRIDGE_UNSAFE_LOCAL"] = "0"
			}
			out, errOut, code := runCLI(t, env, "", "run")
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			want := fmt.Sprintf("bridge: invalid %s=%q: want ", v, val)
			if code != 2 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(errOut, "\n") {
				t.Errorf("%s=%q: exit %d, stdout %q, stderr %q; want exit 2, no stdout, one line starting %q",
					v, val, code, out, tail(errOut, 500), want)
			}
		}
	}
	t.Logf("%d invalid values of %d variables", n, len(vars))
}

// TestBadConfigFiles checks CFG-1: every malformed file shape and entry in
// the config dir is skipped with a warning naming the file, the entry and
// the reason; the bridge starts and the good servers work.
func TestBadConfigFiles(t *testing.T) {
	requirePodman(t)
	dir := t.TempDir()
	files := map[string]string{
		"00-good.json":          `{"mcpServers": {"good": {"command": "` + fakeBin + `"}}}`,
		"array-root.json":       `[{"mcpServers": {}}]`,
		"string-root.json":      `"mcpServers"`,
		"null-root.json":        `null`,
		"truncated.json":        `{"mcpServers": {"x": {"command": "x"`,
		"empty.json":            ``,
		"binary.json":           "\x00\x01\x02\xff\xfe",
		"trailing-garbage.json": `{"mcpServers": {}} {"mcpServers": {}}`,
		"servers-array.json":    `{"mcpServers": [{"command": "x"}]}`,
		"servers-string.json":   `{"mcpServers": "x"}`,
		"servers-number.json":   `{"mcpServers": 5}`,
		"bad-entries.json": `{"mcpServers": {
			"entryNumber": 5, "entryString": "x", "entryList": [1], "entryNull": null, "entryBool": true,
			"commandNumber": {"command": 5},
			"commandList": {"command": ["x"]},
			"argsString": {"command": "x", "args": "y"},
			"argsNumbers": {"command": "x", "args": [1, 2]},
			"argsObject": {"command": "x", "args": {"a": "b"}},
			"envList": {"command": "x", "env": ["A=1"]},
			"envNumber": {"command": "x", "env": {"A": 1}},
			"envString": {"command": "x", "env": "A=1"},
			"cwdNumber": {"command": "x", "cwd": 5},
			"descriptionNumber": {"command": "x", "description": 5},
			"typeUnknown": {"command": "x", "type": "ftp"},
			"typeNumber": {"command": "x", "type": 5},
			"urlNumber": {"url": 5},
			"urlNotHTTP": {"url": "ftp://example.com/mcp"},
			"headersString": {"url": "http://127.0.0.1:1/mcp", "headers": "h"},
			"headersNumbers": {"url": "http://127.0.0.1:1/mcp", "headers": {"h": 1}},
			"httpWithoutURL": {"type": "http"},
			"disabledString": {"command": "x", "disabled": "yes"},
			"missingCommand": {"args": ["a"]},
			"emptyCommand": {"command": ""},
			"also": {"command": "` + fakeBin + `"}
		}}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Unreadable files (the tests may run as root, so no chmod 000): a
	// directory with a .json name and a dangling symlink.
	if err := os.Mkdir(filepath.Join(dir, "a-directory.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "no-such-target"), filepath.Join(dir, "dangling.json")); err != nil {
		t.Fatal(err)
	}
	missingExtra := filepath.Join(t.TempDir(), "missing.json")
	b := startBridgeLogged(t, map[string]string{"MCP_BRIDGE_CONFIG_DIR": dir, "MCP_SERVERS_CONFIG": missingExtra})
	if got := b.mustOK("print(runtime.discovered_servers())"); got != "('good', 'also')" {
		t.Errorf("discovered servers: %s, want ('good', 'also')", got)
	}
	if got := b.mustOK("print(await mcp_good.add(1, 2), await mcp_also.add(3, 4))", "good", "also"); got != "{'sum': 3} {'sum': 7}" {
		t.Errorf("good servers: %s", got)
	}
	// The skip warnings, as logged (zerolog JSON lines on stderr).
	type skip struct{ file, entry, reason string }
	var skips []skip
	for _, line := range strings.Split(b.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["message"] != "config entry skipped" {
			continue
		}
		f, _ := m["file"].(string)
		e, _ := m["entry"].(string)
		r, _ := m["reason"].(string)
		skips = append(skips, skip{f, e, r})
	}
	find := func(file, entry string) (skip, bool) {
		for _, s := range skips {
			if filepath.Base(s.file) == file && s.entry == entry {
				return s, true
			}
		}
		return skip{}, false
	}
	// File-level problems: the warning names the file and a reason.
	for _, f := range []string{"array-root.json", "string-root.json", "null-root.json", "truncated.json", "empty.json",
		"binary.json", "trailing-garbage.json", "servers-array.json", "servers-string.json", "servers-number.json",
		"a-directory.json", "dangling.json", "missing.json"} {
		if s, ok := find(f, ""); !ok || s.reason == "" {
			t.Errorf("no skip warning naming %s with a reason", f)
		}
	}
	// Entry-level problems: the warning names the file, the entry and a
	// reason that names the offending field.
	entries := map[string]string{
		"entryNumber": "object", "entryString": "object", "entryList": "object", "entryNull": "object", "entryBool": "object",
		"commandNumber": `"command"`, "commandList": `"command"`, "argsString": `"args"`, "argsNumbers": `"args"`, "argsObject": `"args"`,
		"envList": `"env"`, "envNumber": `"env"`, "envString": `"env"`, "cwdNumber": `"cwd"`, "descriptionNumber": `"description"`,
		"typeUnknown": `"type"`, "typeNumber": `"type"`, "urlNumber": `"url"`, "urlNotHTTP": `"url"`, "headersString": `"headers"`,
		"headersNumbers": `"headers"`, "httpWithoutURL": `"url"`, "disabledString": `"disabled"`, "missingCommand": `"command"`,
		"emptyCommand": `"command"`,
	}
	for entry, field := range entries {
		s, ok := find("bad-entries.json", entry)
		if !ok {
			t.Errorf("no skip warning naming bad-entries.json and entry %s", entry)
			continue
		}
		if !strings.Contains(s.reason, field) {
			t.Errorf("entry %s skipped with reason %q, which does not name %s", entry, s.reason, field)
		}
	}
	t.Logf("%d skip warnings", len(skips))
}
