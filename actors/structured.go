package actors

import (
	"context"
	"regexp"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Structured-content policies, as MCP_BRIDGE_STRUCTURED names them.
const (
	StructuredAuto   = "auto"
	StructuredAlways = "always"
	StructuredNever  = "never"
)

// nonAlnum splits a client name into its words.
var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// PrefersStructured reports whether a client, by the name it sent in
// clientInfo at initialize, shows the model structuredContent instead of
// content when a result carries both. Claude Code does (it sends
// "claude-code"); the match ignores case and separators, so "Claude Code",
// "claude_code" and "claude-code-vscode" match too.
func PrefersStructured(clientName string) bool {
	norm := "-" + strings.Trim(nonAlnum.ReplaceAllString(strings.ToLower(clientName), "-"), "-") + "-"
	return strings.Contains(norm, "-claude-code-") || strings.Contains(norm, "-claudecode-")
}

// HasImage reports whether any content block of res is an image (by value
// or pointer; mcp.Content is sealed, so these are the only two forms).
func HasImage(res *mcp.CallToolResult) bool {
	for _, c := range res.Content {
		switch c.(type) {
		case mcp.ImageContent, *mcp.ImageContent:
			return true
		}
	}
	return false
}

// KeepStructured decides, for a final result, whether structuredContent is
// sent: always with "always", never with "never", and with "auto" unless
// the result carries an image or the client prefers structuredContent
// over content (either would hide the text or the images from the model).
func KeepStructured(policy, clientName string, res *mcp.CallToolResult) bool {
	switch policy {
	case StructuredAlways:
		return true
	case StructuredNever:
		return false
	}
	return !HasImage(res) && !PrefersStructured(clientName)
}

// ClientName is the clientInfo.name of the MCP session of ctx, "" when
// unknown.
func ClientName(ctx context.Context) string {
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		return s.GetClientInfo().Name
	}
	return ""
}

// shape applies the structured-content policy to a rendered result.
func (f *Front) shape(ctx context.Context, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res != nil && !KeepStructured(f.cfg.Structured, ClientName(ctx), res) {
		res.StructuredContent, res.RawStructuredContent = nil, nil
	}
	return res
}
