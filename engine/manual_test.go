package engine

import (
	"strings"
	"testing"

	"github.com/bridge-mcp/bridge/engine/container"
)

// TestManualWithMounts checks the manual's mount line, bounded in length.
func TestManualWithMounts(t *testing.T) {
	if got := ManualWithMounts("M", nil); got != "M" {
		t.Errorf("no mounts: %q", got)
	}
	got := ManualWithMounts("M", []container.Mount{{Container: "/data"}, {Container: "/mnt/o", RW: true}})
	if want := "M\n\nHost folders mounted (MCP_BRIDGE_MOUNTS): `/data` (read-only), `/mnt/o` (read-write). Nothing else of the host is visible."; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	many := make([]container.Mount, 50)
	for i := range many {
		many[i] = container.Mount{Container: "/data/x"}
	}
	if got := ManualWithMounts("M", many); !strings.Contains(got, "and 42 more") || strings.Count(got, "/data/x") != 8 {
		t.Errorf("50 mounts: %q", got)
	}
}
