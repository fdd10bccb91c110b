package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"
)

// TestToolEntryBudget checks TOOL-1: the entry with its _meta costs at most
// 150 o200k tokens for every valid timeout pair, both as mcp-go puts it on
// the wire and as a client re-serializes it after parsing (mcp-go's client
// sorts the schema keys, which tokenizes differently).
func TestToolEntryBudget(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ def, max int }{{30, 120}, {1, 1}, {86400, 86400}, {99999 % 86400, 86400}} {
		wire, err := json.Marshal(Tool(tc.def, tc.max))
		if err != nil {
			t.Fatal(err)
		}
		var parsed mcp.Tool
		if err := json.Unmarshal(wire, &parsed); err != nil {
			t.Fatal(err)
		}
		client, _ := json.Marshal(parsed)
		for _, raw := range [][]byte{wire, client} {
			n, err := enc.Count(string(raw))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Tool(%d, %d): %d o200k tokens", tc.def, tc.max, n)
			if n > 150 {
				t.Errorf("Tool(%d, %d) costs %d o200k tokens, budget 150: %s", tc.def, tc.max, n, raw)
			}
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
	want := `{"type":"object","properties":{"code":{"type":"string"},"servers":{"type":"array","items":{"type":"string"},"description":"servers the code uses"},` +
		`"timeout":{"type":"integer","minimum":1,"maximum":120,"default":30},"session":{"type":"string"}},"required":["code"]}`
	if got.Name != "run_python" || string(got.Annotations) != "{}" || string(got.InputSchema) != want {
		t.Errorf("entry = %s", raw)
	}
}

// TestToolAlwaysLoad checks that the entry carries
// _meta["anthropic/alwaysLoad"] by default and not when it is turned off.
func TestToolAlwaysLoad(t *testing.T) {
	for _, tc := range []struct {
		opts []ToolOption
		want string
	}{
		{nil, `{"anthropic/alwaysLoad":true}`},
		{[]ToolOption{WithAlwaysLoad(true)}, `{"anthropic/alwaysLoad":true}`},
		{[]ToolOption{WithAlwaysLoad(false)}, ``},
	} {
		raw, _ := json.Marshal(Tool(30, 120, tc.opts...))
		var got struct {
			Meta json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if string(got.Meta) != tc.want {
			t.Errorf("_meta = %s, want %s", got.Meta, tc.want)
		}
	}
}

// TestToolInventory checks MCP_BRIDGE_TOOL_INVENTORY=names: names and
// descriptions while they fit, names and "+N more" beyond, and never more
// than InventoryBudget o200k tokens at any number of servers.
func TestToolInventory(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	servers := func(n int, desc string) []InventoryServer {
		out := make([]InventoryServer, n)
		for i := range out {
			out[i] = InventoryServer{Name: fmt.Sprintf("server-%d", i), Description: desc}
		}
		return out
	}
	if got := Inventory(nil); got != "" {
		t.Errorf("Inventory(nil) = %q, want empty", got)
	}
	got := Inventory([]InventoryServer{{Name: "github", Description: "GitHub issues\nand more"}, {Name: "fs"}})
	if want := " Servers: github (GitHub issues), fs."; got != want {
		t.Errorf("Inventory(2) = %q, want %q", got, want)
	}
	long := strings.Repeat("é", 100)
	if got := Inventory([]InventoryServer{{Name: "x", Description: long}}); !strings.HasSuffix(got, "…).") || len(got) > 100 {
		t.Errorf("long description: %q", got)
	}
	for _, n := range []int{10, 100, 1000} {
		got := Inventory(servers(n, "A server that does a number of useful things for you"))
		k, _ := enc.Count(got)
		if k > InventoryBudget {
			t.Errorf("Inventory(%d) costs %d tokens, budget %d: %q", n, k, InventoryBudget, got)
		}
		if !strings.HasPrefix(got, " Servers: server-0, server-1") {
			t.Errorf("Inventory(%d) = %q, want the first names", n, got)
		}
		t.Logf("inventory of %d servers: %d o200k tokens", n, k)
		if wantMore := n >= 100; strings.HasSuffix(got, " more.") != wantMore || (!wantMore && !strings.HasSuffix(got, "server-9.")) {
			t.Errorf("Inventory(%d) = %q, want a +N more tail only when not all names fit", n, got)
		}
		raw, _ := json.Marshal(Tool(30, 120, WithInventory(got)))
		var entry struct{ Description string }
		_ = json.Unmarshal(raw, &entry)
		if entry.Description != ToolDescription+got {
			t.Errorf("description = %q", entry.Description)
		}
	}
}
