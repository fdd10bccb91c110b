package engine

import (
	"fmt"
	"strings"

	"github.com/bridge-mcp/bridge/engine/container"
)

// maxManualMounts bounds the mount lines the manual lists (MAN-1 budget).
const maxManualMounts = 8

// ManualWithMounts is the manual of runtime.capability_summary() and the
// capabilities resource: manual, plus the configured host folders.
func ManualWithMounts(manual string, mounts []container.Mount) string {
	if len(mounts) == 0 {
		return manual
	}
	var items []string
	for i, m := range mounts {
		if i == maxManualMounts {
			items = append(items, fmt.Sprintf("and %d more", len(mounts)-i))
			break
		}
		mode := "read-only"
		if m.RW {
			mode = "read-write"
		}
		items = append(items, fmt.Sprintf("`%s` (%s)", m.Container, mode))
	}
	return manual + "\n\nHost folders mounted (MCP_BRIDGE_MOUNTS): " + strings.Join(items, ", ") +
		". Nothing else of the host is visible."
}

// rwMounts are the container paths of the read-write mounts.
func rwMounts(mounts []container.Mount) []string {
	var out []string
	for _, m := range mounts {
		if m.RW {
			out = append(out, m.Container)
		}
	}
	return out
}
