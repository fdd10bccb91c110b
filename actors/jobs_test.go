package actors

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// TestJobScopes: a token yields exactly the scope it was issued for (its
// deadline dropped, its counter shared with the call), one token per call,
// tokens never issued are unknown, and the oldest is forgotten past
// maxJobScopes.
func TestJobScopes(t *testing.T) {
	var j jobScopes
	counter := new(atomic.Int64)
	call := Scope{Session: "s", Call: 1, Servers: []string{"a"}, Deadline: time.Now().Add(time.Minute), ToolCalls: counter}
	tok := j.issue(call)
	if again := j.issue(call); again != tok {
		t.Errorf("second token for the same call: %q, want %q", again, tok)
	}
	got, ok := j.lookup(tok)
	if !ok || got.Call != 1 || len(got.Servers) != 1 || got.Servers[0] != "a" || !got.Deadline.IsZero() || got.ToolCalls != counter {
		t.Errorf("lookup(%q) = %+v, %v", tok, got, ok)
	}
	for _, forged := range []string{"", "00000000000000000000000000000000", tok + "0", strings.ToUpper(tok)} {
		if _, ok := j.lookup(forged); ok && forged != tok {
			t.Errorf("forged token %q was found", forged)
		}
	}
	for n := int64(2); n <= maxJobScopes+1; n++ {
		j.issue(Scope{Call: n})
	}
	if _, ok := j.lookup(tok); ok {
		t.Errorf("the oldest token outlived %d newer ones", maxJobScopes)
	}
	if len(j.byToken) != maxJobScopes || len(j.byCall) != maxJobScopes {
		t.Errorf("kept %d tokens for %d calls, want %d", len(j.byToken), len(j.byCall), maxJobScopes)
	}
	if fresh := j.issue(call); fresh == tok {
		t.Errorf("a forgotten call got its old token back")
	}
}

// TestJobToken: the meta is decoded strictly; none, or null, is no token.
func TestJobToken(t *testing.T) {
	cases := []struct {
		meta    string
		want    string
		wantErr string
	}{
		{"", "", ""},
		{"null", "", ""},
		{`{"job":"abc"}`, "abc", ""},
		{`{}`, "", ""},
		{`{"job":"abc","servers":["x"]}`, "", `unknown field "servers"`},
		{`{"job":7}`, "", "cannot unmarshal number"},
	}
	for _, c := range cases {
		req := &jsonrpc2.Request{Method: "call_tool"}
		if c.meta != "" {
			raw := json.RawMessage(c.meta)
			req.Meta = &raw
		}
		got, err := jobToken(req)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("meta %s: error %v, want %q", c.meta, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("meta %s: %q, %v; want %q", c.meta, got, err, c.want)
		}
	}
}
