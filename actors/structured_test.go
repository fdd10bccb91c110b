package actors

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestPrefersStructured checks the clientInfo names recognised as clients
// that show structuredContent instead of content.
func TestPrefersStructured(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"claude-code", true},
		{"Claude Code", true},
		{"claude_code", true},
		{"CLAUDE-CODE", true},
		{"claude-code-vscode", true},
		{"ClaudeCode", true},
		{"claude-ai", false},
		{"claude-codex-fork", false},
		{"Visual Studio Code", false},
		{"cursor-vscode", false},
		{"bridge-e2e", false},
		{"", false},
	} {
		if got := PrefersStructured(tc.name); got != tc.want {
			t.Errorf("PrefersStructured(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestKeepStructured checks every MCP_BRIDGE_STRUCTURED mode against text
// results, image results and a Claude-Code-like client.
func TestKeepStructured(t *testing.T) {
	text := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("hi")}}
	image := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("hi"), mcp.NewImageContent("iVBO", "image/png")}}
	imagePtr := &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Type: "image", Data: "iVBO", MIMEType: "image/png"}}}
	for _, tc := range []struct {
		policy, client string
		res            *mcp.CallToolResult
		want           bool
	}{
		{"auto", "bridge-e2e", text, true},
		{"", "bridge-e2e", text, true},
		{"auto", "", text, true},
		{"auto", "bridge-e2e", image, false},
		{"auto", "bridge-e2e", imagePtr, false},
		{"auto", "claude-code", text, false},
		{"auto", "claude-code", image, false},
		{"always", "claude-code", image, true},
		{"always", "bridge-e2e", text, true},
		{"never", "bridge-e2e", text, false},
		{"never", "claude-code", text, false},
	} {
		if got := KeepStructured(tc.policy, tc.client, tc.res); got != tc.want {
			t.Errorf("KeepStructured(%q, %q, %d blocks) = %v, want %v", tc.policy, tc.client, len(tc.res.Content), got, tc.want)
		}
	}
}
