package mcpwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// scanAll scans line in chunks of n bytes.
func scanAll(line string, n int) *scan {
	s := &scan{}
	for b := []byte(line); len(b) > 0; {
		k := min(n, len(b))
		s.feed(b[:k])
		b = b[k:]
	}
	s.finish()
	return s
}

func TestScanID(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		depth      int
	}{
		{`{"jsonrpc":"2.0","id":5,"result":{}}`, `5`, 2},
		{`{"result":{"id":"inner","a":[1,{"id":2}]},"jsonrpc":"2.0","id":"bridge-7"}`, `"bridge-7"`, 4},
		{`{"id":-1.5e3}`, `-1.5e3`, 1},
		{`{"id":"a\"b\\"}`, `"a\"b\\"`, 1},
		{`{"\u0069d":9}`, `9`, 1},
		{`{ "id" : 12 , "x":1}`, `12`, 1},
		{`{"id":null,"result":{}}`, ``, 2},
		{`{"id":true}`, ``, 1},
		{`{"id":{"x":1}}`, ``, 2},
		{`{"id":[1]}`, ``, 2},
		{`{"x":"id","y":1}`, ``, 1},
		{`{"x":{"id":1}}`, ``, 2},
		{`["id",1]`, ``, 1},
		{`{"id":"` + strings.Repeat("x", 300) + `"}`, ``, 1},
		{`{"id":1,"id":2}`, `1`, 1},
		{`{"id" , "a": 3}`, ``, 1},
		{`{"result":` + strings.Repeat("[", 1500) + strings.Repeat("]", 1500) + `,"id":3}`, `3`, 1501},
		{`{"id":4,"result":{"s":"` + strings.Repeat("[", 50) + `"}}`, `4`, 2},
	} {
		for _, n := range []int{1, 2, 3, 7, 1 << 20} {
			s := scanAll(tc.line, n)
			if got := string(s.id); got != tc.want {
				t.Errorf("id of %.60s (chunks of %d) = %q, want %q", tc.line, n, got, tc.want)
			}
			if got := s.maxDepth; got != tc.depth {
				t.Errorf("depth of %.60s (chunks of %d) = %d, want %d", tc.line, n, got, tc.depth)
			}
		}
	}
}

// TestScanAgreesWithDecoder: on frames encoding/json decodes, the scan
// reads the same id (checked on frames with one "id" member).
func TestScanAgreesWithDecoder(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":0,"result":{"content":[]}}`,
		`{"result":{"content":[{"type":"text","text":"{\"id\":\"no\"}"}]},"jsonrpc":"2.0","id":"x"}`,
		`{"error":{"code":-32000,"message":"m"},"id":123456789012}`,
	} {
		var env envelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatal(err)
		}
		if got, want := scanAll(line, 3).id, env.ID; !bytes.Equal(got, want) {
			t.Errorf("scan of %s: id %s, want %s", line, got, want)
		}
	}
}
