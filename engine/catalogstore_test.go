package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestCatalogStoreKeepsEra: the era a server was reached with, its
// revision and when it was probed survive the disk (issue 38); an era the
// bridge does not know, as from an edited file, reads as unknown, so the
// next start probes again.
func TestCatalogStoreKeepsEra(t *testing.T) {
	s := &catalogStore{dir: t.TempDir(), log: zerolog.Nop()}
	probed := time.Date(2026, 11, 28, 10, 1, 2, 0, time.UTC)
	s.Save("h", actors.ServerCatalog{Version: "4", Era: actors.EraModern, Protocol: "2026-07-28", Probed: probed})
	got, ok := s.Load("h")
	if !ok || got.Era != actors.EraModern || got.Protocol != "2026-07-28" || !got.Probed.Equal(probed) || got.Version != "4" {
		t.Fatalf("Load = %+v, %v", got, ok)
	}
	if desc, want := got.DescribeEra(), "modern (2026-07-28), probed 2026-11-28 10:01:02 UTC"; desc != want {
		t.Errorf("DescribeEra = %q, want %q", desc, want)
	}
	path := filepath.Join(s.dir, "h.json")
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), `"era":"modern"`, `"era":"future"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load("h"); got.Era != actors.EraUnknown {
		t.Errorf("an unknown era loaded as %q, want unknown", got.Era)
	}
}
