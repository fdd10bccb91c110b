package main

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// askTool sends elicitation/create whatever its client declared, and
// answers with what came back: "action ACTION CONTENT", or "error TEXT".
func askTool(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	req := mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message: "What is your name?",
		RequestedSchema: map[string]any{"type": "object",
			"properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}},
	}}
	res, err := server.ServerFromContext(ctx).RequestElicitation(ctx, req)
	if err != nil {
		return mcp.NewToolResultText("error " + err.Error()), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("action %s %v", res.Action, res.Content)), nil
}
