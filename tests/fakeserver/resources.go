package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// registerResources adds the fake's resources: mem://image (a 1x1 PNG
// blob) and the template mem://big/{bytes} (text of exactly that many
// bytes, at most 1 GiB), for the bridge's caps on what a read returns.
func registerResources(s *server.MCPServer) {
	s.AddResource(mcp.NewResource("mem://image", "image", mcp.WithMIMEType("image/png")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.BlobResourceContents{URI: "mem://image", MIMEType: "image/png", Blob: pngBase64}}, nil
		})
	s.AddResourceTemplate(mcp.NewResourceTemplate("mem://big/{bytes}", "big"),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			n, err := strconv.Atoi(strings.TrimPrefix(req.Params.URI, "mem://big/"))
			if err != nil || n < 0 || n > 1<<30 {
				return nil, fmt.Errorf("bytes must be in [0, 1 GiB]")
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: strings.Repeat("x", n)}}, nil
		})
}
