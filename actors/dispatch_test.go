package actors

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// TestValidate checks §4.3's checks, their order and the normalizations of
// VAL-0 and VAL-1.
func TestValidate(t *testing.T) {
	d := &Dispatcher{DefaultTimeout: 30, MaxTimeout: 120, MaxCodeBytes: 64}
	cases := []struct {
		raw     string
		wantErr string
		want    Args
	}{
		{``, "Missing 'code' argument", Args{}},
		{`null`, "Missing 'code' argument", Args{}},
		{`[]`, "Missing 'code' argument", Args{}},
		{`{}`, "Missing 'code' argument", Args{}},
		{`{"code":null}`, "Missing 'code' argument", Args{}},
		{`{"code":7}`, "Missing 'code' argument", Args{}},
		{`{"code":" \n\t"}`, "Missing 'code' argument", Args{}},
		{`{"code":"` + strings.Repeat("x", 65) + `"}`, "'code' is 65 bytes; the limit is 64 bytes", Args{}},
		{`{"code":"1","servers":"a"}`, "'servers' must be a list", Args{}},
		{`{"code":"1","servers":{"a":1}}`, "'servers' must be a list", Args{}},
		{`{"code":"1","servers":["a",2]}`, "'servers' must be a list of strings", Args{}},
		{`{"code":"1","servers":[null]}`, "'servers' must be a list of strings", Args{}},
		{`{"code":"1","timeout":2.5}`, "'timeout' must be an integer", Args{}},
		{`{"code":"1","timeout":5.0}`, "'timeout' must be an integer", Args{}},
		{`{"code":"1","timeout":1e2}`, "'timeout' must be an integer", Args{}},
		{`{"code":"1","timeout":"5"}`, "'timeout' must be an integer", Args{}},
		{`{"code":"1","timeout":true}`, "'timeout' must be an integer", Args{}},
		{`{"code":"1","timeout":0}`, "'timeout' must be between 1 and 120 seconds", Args{}},
		{`{"code":"1","timeout":-3}`, "'timeout' must be between 1 and 120 seconds", Args{}},
		{`{"code":"1","timeout":-99999999999999999999}`, "'timeout' must be between 1 and 120 seconds", Args{}},
		{`{"code":"1","session":""}`, "'session' must be 1-64 characters from A-Z a-z 0-9 _ . -", Args{}},
		{`{"code":"1","session":"a/b"}`, "'session' must be 1-64 characters from A-Z a-z 0-9 _ . -", Args{}},
		{`{"code":"1","session":5}`, "'session' must be 1-64 characters from A-Z a-z 0-9 _ . -", Args{}},
		// The first failing check wins.
		{`{"servers":"a","timeout":"x"}`, "Missing 'code' argument", Args{}},
		{`{"code":"1","servers":"a","timeout":"x"}`, "'servers' must be a list", Args{}},
		// Valid arguments.
		{`{"code":"1"}`, "", Args{Code: "1", Timeout: 30, Session: "default"}},
		{`{"code":"1","servers":["b","a","b"],"timeout":7,"session":"s.1-x_y"}`, "",
			Args{Code: "1", Servers: []string{"b", "a"}, Timeout: 7, Session: "s.1-x_y"}},
		// Unknown arguments are ignored, and named (issue 35).
		{`{"code":"1","language":"python","extra":1}`, "", Args{Code: "1", Timeout: 30, Session: "default",
			Notes: []string{"ignored arguments 'extra', 'language': run_python takes only code, servers, timeout, session"}}},
		{`{"code":"1","a":1,"b":1,"c":1,"d":1,"e":1,"f\u0007":1,"g":1}`, "", Args{Code: "1", Timeout: 30, Session: "default",
			Notes: []string{"ignored arguments 'a', 'b', 'c', 'd', 'e', and 2 more: run_python takes only code, servers, timeout, session"}}},
		{`{"code":"1","timeout":121}`, "", Args{Code: "1", Timeout: 120, Session: "default",
			Notes: []string{"timeout clamped to 120s (MCP_BRIDGE_MAX_TIMEOUT)"}}},
		{`{"code":"1","timeout":99999999999999999999}`, "", Args{Code: "1", Timeout: 120, Session: "default",
			Notes: []string{"timeout clamped to 120s (MCP_BRIDGE_MAX_TIMEOUT)"}}},
		{`{"code":"1","servers":null,"timeout":null,"session":null}`, "", Args{Code: "1", Timeout: 30, Session: "default"}},
	}
	for _, c := range cases {
		got, msg := d.Validate(json.RawMessage(c.raw))
		if msg != c.wantErr {
			t.Errorf("Validate(%s) error = %q, want %q", c.raw, msg, c.wantErr)
			continue
		}
		if c.wantErr == "" && !equalArgs(got, c.want) {
			t.Errorf("Validate(%s) = %+v, want %+v", c.raw, got, c.want)
		}
	}
}

func equalArgs(a, b Args) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestActiveCallCap checks that the host keeps at most its cap of output
// per call (TRN-3), merging runs of one stream.
func TestActiveCallCap(t *testing.T) {
	a := &activeCall{limit: 10}
	a.add(result.StreamStdout, "abc")
	a.add(result.StreamStdout, "def")
	a.add(result.StreamStderr, "ghijkl")
	a.add(result.StreamStdout, "zzz")
	out, truncated, _ := a.snapshot()
	got, _ := json.Marshal(out)
	if want := `[{"Stream":"stdout","Data":"abcdef"},{"Stream":"stderr","Data":"ghij"}]`; string(got) != want || !truncated {
		t.Errorf("output = %s truncated=%v, want %s truncated=true", got, truncated, want)
	}
}
