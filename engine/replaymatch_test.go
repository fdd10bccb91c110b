package engine

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/engine/audit"
	"github.com/bridge-mcp/bridge/protocol"
)

// toolCall is the link params of a call_tool request.
func toolCall(server, tool, args string) json.RawMessage {
	return json.RawMessage(`{"server":"` + server + `","tool":"` + tool + `","arguments":` + args + `}`)
}

// recorded is the record of calls, each answered with result.
func recorded(red *audit.Redactor, calls ...[3]string) *audit.Record {
	r := &audit.Record{}
	for _, c := range calls {
		in := audit.Inner{Method: protocol.MethodCallTool, Server: c[0], Tool: c[1], Args: audit.NewValue(json.RawMessage(c[2]), red), Outcome: "ok"}
		in.Result = audit.NewValue(json.RawMessage(`{"content":[{"type":"text","text":"`+c[1]+`"}]}`), red)
		r.Inner = append(r.Inner, in)
	}
	return r
}

func TestReplayMatch(t *testing.T) {
	red := audit.NewRedactor(nil)
	rec := recorded(red, [3]string{"a", "x", `{"n":1}`}, [3]string{"a", "x", `{"n":2}`}, [3]string{"b", "y", `{"q":{"k":"v"}}`})
	cases := []struct {
		name        string
		live        []json.RawMessage
		verdict     string
		wantPrefix  string
		wantAnswers int
	}{
		{"in order", []json.RawMessage{toolCall("a", "x", `{"n":1}`), toolCall("a", "x", `{"n":2}`), toolCall("b", "y", `{"q":{"k":"v"}}`)}, VerdictSame, "3 inner calls", 3},
		{"concurrent order", []json.RawMessage{toolCall("b", "y", `{"q":{"k":"v"}}`), toolCall("a", "x", `{"n":2}`), toolCall("a", "x", `{"n":1}`)}, VerdictSame, "3 inner calls", 3},
		{"arguments differ", []json.RawMessage{toolCall("a", "x", `{"n":1}`), toolCall("a", "x", `{"n":3}`)}, VerdictDiverged, "call 2: mcp_a.x: arguments differ: n", 1},
		{"nested key", []json.RawMessage{toolCall("a", "x", `{"n":1}`), toolCall("a", "x", `{"n":2}`), toolCall("b", "y", `{"q":{"k":"w"}}`)}, VerdictDiverged, "call 3: mcp_b.y: arguments differ: q.k", 2},
		{"another tool", []json.RawMessage{toolCall("c", "z", `{}`)}, VerdictDiverged, "call 1: mcp_c.z, where the record has mcp_a.x", 0},
		{"one call missing", []json.RawMessage{toolCall("a", "x", `{"n":1}`), toolCall("a", "x", `{"n":2}`)}, VerdictDiverged, "call 3: mcp_b.y: recorded, but the replay did not make it", 2},
		{"one call more", []json.RawMessage{toolCall("a", "x", `{"n":1}`), toolCall("a", "x", `{"n":2}`), toolCall("b", "y", `{"q":{"k":"v"}}`), toolCall("a", "x", `{"n":1}`)},
			VerdictDiverged, "call 4: mcp_a.x: not in the record (it has 3 calls)", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newReplayMatch(rec)
			answers := 0
			for _, p := range c.live {
				if res, err := m.answer(protocol.MethodCallTool, p, red); err == nil && res != nil {
					answers++
				}
			}
			verdict, detail := m.verdict()
			if verdict != c.verdict || !strings.HasPrefix(detail, c.wantPrefix) || answers != c.wantAnswers {
				t.Errorf("got %s %q with %d answers, want %s %q with %d", verdict, detail, answers, c.verdict, c.wantPrefix, c.wantAnswers)
			}
		})
	}
}

// TestReplayMatchAnswers: a recorded error comes back with its code and
// kind; a result kept as its digest only stops the replay, and every later
// request is refused.
func TestReplayMatchAnswers(t *testing.T) {
	red := audit.NewRedactor(nil)
	rec := &audit.Record{Inner: []audit.Inner{
		{Method: protocol.MethodCallTool, Server: "a", Tool: "deny", Args: audit.NewValue(json.RawMessage(`{}`), red), Outcome: "denied by the user",
			Code: protocol.CodeDenied, Kind: protocol.KindDenied},
		{Method: protocol.MethodCallTool, Server: "a", Tool: "big", Args: audit.NewValue(json.RawMessage(`{}`), red), Outcome: "ok",
			Result: &audit.Value{SHA256: "00", Bytes: 70000}, Bytes: 70000},
	}}
	m := newReplayMatch(rec)
	_, err := m.answer(protocol.MethodCallTool, toolCall("a", "deny", `{}`), red)
	var le *jsonrpc2.Error
	if !errors.As(err, &le) || le.Code != protocol.CodeDenied || le.Message != "denied by the user" {
		t.Fatalf("recorded error replayed as %v", err)
	}
	if _, err := m.answer(protocol.MethodCallTool, toolCall("a", "big", `{}`), red); err == nil {
		t.Fatal("a digest-only result was answered")
	}
	verdict, detail := m.verdict()
	if verdict != VerdictStopped || detail != "call 2: mcp_a.big: its result (70000 bytes) is stored as its digest only, over the record's cap; replay cannot answer it" {
		t.Errorf("verdict %s %q", verdict, detail)
	}
	if _, err := m.answer(protocol.MethodCallTool, toolCall("a", "deny", `{}`), red); err == nil || !strings.Contains(err.Error(), "replay stopped") {
		t.Errorf("after the stop: %v", err)
	}
}
