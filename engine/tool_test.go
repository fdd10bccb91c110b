package engine

import (
	"encoding/json"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// TestToolEntryBudget checks TOOL-1: the entry, serialized as mcp-go puts it
// on the wire, costs at most 150 o200k tokens for every valid timeout pair.
func TestToolEntryBudget(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ def, max int }{{30, 120}, {1, 1}, {86400, 86400}, {99999 % 86400, 86400}} {
		raw, err := json.Marshal(Tool(tc.def, tc.max))
		if err != nil {
			t.Fatal(err)
		}
		n, err := enc.Count(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		if n > 150 {
			t.Errorf("Tool(%d, %d) costs %d o200k tokens, budget 150: %s", tc.def, tc.max, n, raw)
		}
	}
}

// TestToolEntryShape checks TOOL-3: fixed property order and empty annotations.
func TestToolEntryShape(t *testing.T) {
	raw, _ := json.Marshal(Tool(30, 120))
	var got struct {
		Name        string          `json:"name"`
		Annotations json.RawMessage `json:"annotations"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"code":{"type":"string"},"servers":{"type":"array","items":{"type":"string"}},` +
		`"timeout":{"type":"integer","minimum":1,"maximum":120,"default":30},"session":{"type":"string"}},"required":["code"]}`
	if got.Name != "run_python" || string(got.Annotations) != "{}" || string(got.InputSchema) != want {
		t.Errorf("entry = %s", raw)
	}
}
