// Package faketools holds the tools the fake stdio and HTTP/SSE test
// servers share: echo, add and sleep, with fixed schemas, and trace (behind
// a flag, so catalogs keep their counts).
package faketools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Input schemas, written raw so their property order is fixed.
const (
	EchoSchema = `{"type":"object","properties":{` +
		`"text":{"type":"string","description":"Text to return."},` +
		`"repeat":{"type":"integer","minimum":0,"description":"How many times to repeat text (default 1)."}},` +
		`"required":["text"]}`
	EchoOutputSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`
	AddSchema        = `{"type":"object","properties":{` +
		`"a":{"type":"number","description":"First addend."},` +
		`"b":{"type":"number","description":"Second addend."}},` +
		`"required":["a","b"]}`
	SleepSchema = `{"type":"object","properties":{` +
		`"seconds":{"type":"number","minimum":0,"description":"How long to sleep, in seconds."}},` +
		`"required":["seconds"]}`
)

// Tool builds a tool from a raw schema.
func Tool(name, desc, schema string) mcp.Tool {
	return mcp.NewToolWithRawSchema(name, desc, json.RawMessage(schema))
}

// Echo returns text repeated `repeat` times; structured adds {"text": …}
// as structuredContent.
func Echo(structured bool) func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		n := req.GetInt("repeat", 1)
		if n < 0 {
			return mcp.NewToolResultError("repeat must be >= 0"), nil
		}
		out := strings.Repeat(text, n)
		if structured {
			return mcp.NewToolResultStructured(map[string]any{"text": out}, out), nil
		}
		return mcp.NewToolResultText(out), nil
	}
}

// Add returns the JSON text {"sum": a+b}.
func Add(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, err := req.RequireFloat("a")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	b, err := req.RequireFloat("b")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	sum, err := json.Marshal(a + b)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(`{"sum": ` + string(sum) + `}`), nil
}

// Sleep sleeps for `seconds`, ending early (with a stderr line) when the
// call is cancelled.
func Sleep(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	sec, err := req.RequireFloat("seconds")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if sec < 0 {
		return mcp.NewToolResultError("seconds must be >= 0"), nil
	}
	t := time.NewTimer(time.Duration(sec * float64(time.Second)))
	defer t.Stop()
	start := time.Now()
	select {
	case <-t.C:
		return mcp.NewToolResultText("slept " + strconv.FormatFloat(sec, 'f', -1, 64)), nil
	case <-ctx.Done():
		fmt.Fprintf(os.Stderr, "sleep cancelled after %s\n", time.Since(start).Round(time.Millisecond))
		return nil, ctx.Err()
	}
}

// TraceSchema is trace's: no arguments.
const TraceSchema = `{"type":"object","properties":{}}`

type traceHeaderKey struct{}

// WithTraceHeader is an HTTP server's context func that keeps the
// request's traceparent header for Trace.
func WithTraceHeader(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, traceHeaderKey{}, r.Header.Get("traceparent"))
}

// Trace returns the trace context the request carried, as text
// "meta=TRACEPARENT header=TRACEPARENT" (each "" when absent): the
// traceparent of its _meta, and over HTTP that of its header.
func Trace(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	meta := ""
	if m := req.Params.Meta; m != nil {
		meta, _ = m.AdditionalFields["traceparent"].(string)
	}
	header, _ := ctx.Value(traceHeaderKey{}).(string)
	return mcp.NewToolResultText(fmt.Sprintf("meta=%s header=%s", meta, header)), nil
}
