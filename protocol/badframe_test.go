package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestBadFrameAnswered: every line the reader cannot decode is answered,
// -32600 with the id when the top-level id can be read (also past nesting
// far beyond the decoder's depth limit), else -32700 with a null id; valid
// frames around them still arrive.
func TestBadFrameAnswered(t *testing.T) {
	const n = 100_000
	deep := strings.Repeat("[", n) + strings.Repeat("]", n)
	cases := []struct {
		name, line string
		id         string // the reply's id, JSON text
		code       int
	}{
		{"id before deep params", `{"jsonrpc":"2.0","id":7,"method":"memory_get","params":` + deep + `}`, `7`, CodeInvalidRequest},
		{"id after deep params", `{"jsonrpc":"2.0","method":"call_tool","params":{"x":` + deep + `},"id":"late"}`, `"late"`, CodeInvalidRequest},
		{"deep objects", `{"jsonrpc":"2.0","id":"o","params":` + strings.Repeat(`{"a":`, n) + `1` + strings.Repeat("}", n) + `}`, `"o"`, CodeInvalidRequest},
		{"escaped id key", `{"jsonrpc":"2.0","\u0069d":"esc","params":` + deep + `}`, `"esc"`, CodeInvalidRequest},
		{"unterminated with an id", `{"jsonrpc":"2.0","id":"u","method":"ping"`, `"u"`, CodeInvalidRequest},
		{"deep array, no object", deep, `null`, CodeParseError},
		{"id only nested", `{"jsonrpc":"2.0","params":{"id":"inner","x":` + deep + `}}`, `null`, CodeParseError},
		{"id in a string", `{"jsonrpc":"2.0","method":"\"id\":5","params":` + deep + `}`, `null`, CodeParseError},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"params":` + deep + `}`, `null`, CodeParseError},
		{"null id", `{"jsonrpc":"2.0","id":null,"params":` + deep + `}`, `null`, CodeParseError},
		{"plain text", `hello world`, `null`, CodeParseError},
		{"trailing garbage", `{"jsonrpc":"2.0","method":"x"} garbage`, `null`, CodeParseError},
	}
	var in strings.Builder
	in.WriteString(`{"jsonrpc":"2.0","method":"first"}` + "\n")
	for _, c := range cases {
		in.WriteString(c.line + "\n")
	}
	in.WriteString(`{"jsonrpc":"2.0","method":"last"}` + "\n")
	var out bytes.Buffer
	s := NewLineStream(strings.NewReader(in.String()), &out, nil, 16<<20, zerolog.Nop())
	var methods []string
	for {
		var m struct {
			Method string `json:"method"`
		}
		err := s.ReadObject(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		methods = append(methods, m.Method)
	}
	if got, want := strings.Join(methods, ","), "first,last"; got != want {
		t.Errorf("frames read: got %s, want %s", got, want)
	}
	replies := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(replies) != len(cases) {
		t.Fatalf("got %d replies, want %d:\n%s", len(replies), len(cases), out.String())
	}
	for i, c := range cases {
		var r struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(replies[i]), &r); err != nil {
			t.Errorf("%s: reply %q: %v", c.name, replies[i], err)
			continue
		}
		if r.JSONRPC != "2.0" || string(r.ID) != c.id || r.Error.Code != c.code || len(replies[i]) > 512 {
			t.Errorf("%s: got %s, want id %s and code %d in under 512 bytes", c.name, replies[i], c.id, c.code)
		}
	}
	if !strings.Contains(replies[0], "exceeded max depth") {
		t.Errorf("the deep frame's reply does not say why: %s", replies[0])
	}
}
