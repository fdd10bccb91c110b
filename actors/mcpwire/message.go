package mcpwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// MaxDepth is the deepest nesting a server's frame may have. The sandbox's
// Python decodes what a call returns, inside the link's own frame, and its
// json module recurses once per level up to the recursion limit (about 990
// levels on the link's reader thread): a deeper reply would fail there
// instead of here with a message. Half of that leaves room for the link's
// wrapping and for the cell's own code walking the result; real results
// nest a few dozen levels at most.
const MaxDepth = 512

// envelope is a frame's top level, each member kept raw so that a wrong
// JSON type is a message about that member, not a decoding failure of
// the whole frame.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// kind is what a frame is.
type kind uint8

const (
	junk         kind = iota // not a JSON-RPC message the bridge can use
	reply                    // a response to one of the bridge's requests
	notification             // a server notification
	request                  // a server→client request
)

// message is a decoded frame: its kind, the id it names (nil: none), and
// for junk or a bad reply, why ("" for a good message).
type message struct {
	kind kind
	id   json.RawMessage
	why  string
	env  envelope
}

// decode reads a frame within the cap. An invalid frame is junk; when its
// id can still be read, the request of that id is answered with why.
func decode(fr *frame) message {
	m := message{id: fr.scan.id}
	if fr.scan.maxDepth > MaxDepth {
		m.why = fmt.Sprintf("it is nested deeper than %d levels", MaxDepth)
		return m
	}
	line := bytes.TrimSpace(fr.line)
	if err := json.Unmarshal(line, &m.env); err != nil {
		m.why = "it is not a JSON object"
		if len(line) > 0 && line[0] == '{' {
			m.why = "it is not valid JSON: " + clip(err.Error(), 120)
		}
		return m
	}
	if IsNull(m.env.Method) {
		m.kind, m.why = reply, checkReply(m.env)
		return m
	}
	var method string
	if json.Unmarshal(m.env.Method, &method) != nil || method == "" {
		m.why = "its method is " + TypeOf(m.env.Method) + ", not a name"
		return m
	}
	m.kind = notification
	if !IsNull(m.env.ID) {
		m.kind = request
	}
	return m
}

// checkReply says what makes a reply unusable; "" when nothing does.
// JSON-RPC asks for exactly one of result and error; MCP's results are
// objects; an error has an integer code and a string message.
func checkReply(env envelope) string {
	hasResult, hasError := !IsNull(env.Result), !IsNull(env.Error)
	switch {
	case hasResult && hasError:
		return "it has both a result and an error"
	case hasError:
		return checkError(env.Error)
	case !hasResult:
		return "it has neither a result nor an error"
	case TypeOf(env.Result) != "an object":
		return "its result is " + TypeOf(env.Result) + ", not an object"
	}
	return ""
}

func checkError(raw json.RawMessage) string {
	var e map[string]json.RawMessage
	if json.Unmarshal(raw, &e) != nil {
		return "its error is " + TypeOf(raw) + ", not an object"
	}
	code, ok := e["code"]
	if !ok {
		return "error.code is missing"
	}
	var n float64
	if TypeOf(code) != "a number" || json.Unmarshal(code, &n) != nil || n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
		return "error.code is " + TypeOf(code) + ", not an integer"
	}
	msg, ok := e["message"]
	if !ok {
		return "error.message is missing"
	}
	if TypeOf(msg) != "a string" {
		return "error.message is " + TypeOf(msg) + ", not a string"
	}
	return ""
}

// response is a checked reply as mcp-go's transport returns it.
func (m *message) response() (*transport.JSONRPCResponse, error) {
	var id mcp.RequestId
	_ = id.UnmarshalJSON(m.id)
	resp := &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: m.env.Result}
	if !IsNull(m.env.Error) {
		resp.Result = nil
		resp.Error = &mcp.JSONRPCErrorDetails{}
		if err := json.Unmarshal(m.env.Error, resp.Error); err != nil {
			return nil, fmt.Errorf("error: %w", err) // checkReply passed it: not reached
		}
	}
	return resp, nil
}

// idKey is the pending-request key of a raw id, as mcp-go keys its own
// (RequestId.String): a reply's 5 and 5.0 both answer request 5.
func idKey(raw json.RawMessage) (string, bool) {
	var id mcp.RequestId
	if len(raw) == 0 || id.UnmarshalJSON(raw) != nil || id.IsNil() {
		return "", false
	}
	return id.String(), true
}

// IsNull says whether raw is absent or JSON null: a member that says
// nothing.
func IsNull(raw json.RawMessage) bool {
	t := TypeOf(raw)
	return t == "null" || t == "missing"
}

// TypeOf names the JSON type of raw, with its article ("an object", "a
// string", "null", "missing" for nothing), for messages about a member of
// the wrong type.
func TypeOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "missing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// clip bounds a message taken from a decoder.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
