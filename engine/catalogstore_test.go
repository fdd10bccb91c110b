package engine

import (
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
)

// TestCatalogStoreKeepsSkipped: the disk catalog holds the raw tools/list,
// the entries the bridge cannot use included (PXY-8), and a load marks
// them again.
func TestCatalogStoreKeepsSkipped(t *testing.T) {
	s := &catalogStore{dir: t.TempDir(), log: zerolog.Nop()}
	raws := []json.RawMessage{
		json.RawMessage(`{"name":"good"}`),
		json.RawMessage(`{"name":"bad","inputSchema":"x"}`),
		json.RawMessage(`5`),
	}
	s.Save("h", actors.ServerCatalog{Version: "1", Tools: actors.ParseTools(raws)})
	cat, ok := s.Load("h")
	tools := cat.Tools
	if !ok || len(tools) != len(raws) {
		t.Fatalf("Load = %d tools, %v; want %d", len(tools), ok, len(raws))
	}
	for i, want := range []string{"", "inputSchema is a string, not an object", "the entry is a number, not an object"} {
		if got := tools[i].Skip; got != want {
			t.Errorf("entry %d: Skip = %q, want %q", i+1, got, want)
		}
	}
}

// TestServerCheck: doctor's line for a started server counts its usable
// tools, and a server that skipped some is a WARN naming each with its
// reason.
func TestServerCheck(t *testing.T) {
	tools := actors.ParseTools([]json.RawMessage{
		json.RawMessage(`{"name":"good"}`),
		json.RawMessage(`{"name":"bad","inputSchema":"x"}`),
		json.RawMessage(`{"name":"props","inputSchema":{"properties":[]}}`),
	})
	cases := []struct {
		name  string
		tools []actors.ToolInfo
		want  Check
	}{
		{"all usable", tools[:1], Check{"OK", "server s", "stdio, 1 tools"}},
		{"skipped", tools, Check{"WARN", "server s", "stdio, 1 tools; skipped 2 tools the bridge cannot use: " +
			"'bad' (inputSchema is a string, not an object), 'props' (inputSchema.properties is an array, not an object); its other tools work"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := serverCheck("server s", "stdio", c.tools); got != c.want {
				t.Errorf("serverCheck = %+v\nwant %+v", got, c.want)
			}
		})
	}
}
