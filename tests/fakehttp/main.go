// Command fakehttp is an MCP server over HTTP, built with mcp-go, for the
// bridge's end-to-end tests of remote servers. It serves the tools echo,
// add and sleep (same behaviour as tests/fakeserver) over streamable HTTP
// (--transport http, the default) or the legacy SSE transport (--transport
// sse), listens on --addr (default 127.0.0.1:0, a free port) and prints the
// URL to connect to as the first line on stdout:
//
//	http://127.0.0.1:PORT/mcp   with --transport http
//	http://127.0.0.1:PORT/sse   with --transport sse
//
// It runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("fakehttp", flag.ContinueOnError)
	transport := fs.String("transport", "http", "http (streamable HTTP) or sse")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	name := fs.String("name", "fake-http", "server name reported in serverInfo")
	structured := fs.Bool("structured", false, "echo also returns structuredContent {\"text\": ...}")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *transport != "http" && *transport != "sse" {
		fmt.Fprintf(os.Stderr, "fakehttp: unknown --transport %q (want http or sse)\n", *transport)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakehttp: %v\n", err)
		return 1
	}
	base := "http://" + ln.Addr().String()

	s := newServer(*name, *structured)
	var (
		handler  http.Handler
		url      string
		shutdown func(context.Context) error
	)
	switch *transport {
	case "http":
		h := server.NewStreamableHTTPServer(s)
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		handler, url, shutdown = mux, base+"/mcp", h.Shutdown
	case "sse":
		h := server.NewSSEServer(s, server.WithBaseURL(base))
		endpoint, err := h.CompleteSseEndpoint()
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakehttp: %v\n", err)
			return 1
		}
		handler, url = h, endpoint
		shutdown = func(context.Context) error { h.CloseSessions(); return nil }
	}

	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Println(url)

	select {
	case err := <-errc:
		fmt.Fprintf(os.Stderr, "fakehttp: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = shutdown(sctx)
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(os.Stderr, "fakehttp: shutdown: %v\n", err)
	}
	return 0
}

const (
	echoSchema = `{"type":"object","properties":{` +
		`"text":{"type":"string","description":"Text to return."},` +
		`"repeat":{"type":"integer","minimum":0,"description":"How many times to repeat text (default 1)."}},` +
		`"required":["text"]}`
	addSchema = `{"type":"object","properties":{` +
		`"a":{"type":"number","description":"First addend."},` +
		`"b":{"type":"number","description":"Second addend."}},` +
		`"required":["a","b"]}`
	sleepSchema = `{"type":"object","properties":{` +
		`"seconds":{"type":"number","minimum":0,"description":"How long to sleep, in seconds."}},` +
		`"required":["seconds"]}`
)

func newServer(name string, structured bool) *server.MCPServer {
	s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(true), server.WithRecovery())
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Return text, optionally repeated.", json.RawMessage(echoSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
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
		})
	s.AddTool(mcp.NewToolWithRawSchema("add", "Add two numbers; returns JSON {\"sum\": a+b}.", json.RawMessage(addSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
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
		})
	s.AddTool(mcp.NewToolWithRawSchema("sleep", "Sleep for the given number of seconds; ends early when cancelled.", json.RawMessage(sleepSchema)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			sec, err := req.RequireFloat("seconds")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			if sec < 0 {
				return mcp.NewToolResultError("seconds must be >= 0"), nil
			}
			t := time.NewTimer(time.Duration(sec * float64(time.Second)))
			defer t.Stop()
			select {
			case <-t.C:
				return mcp.NewToolResultText("slept " + strconv.FormatFloat(sec, 'f', -1, 64)), nil
			case <-ctx.Done():
				fmt.Fprintln(os.Stderr, "sleep cancelled")
				return nil, ctx.Err()
			}
		})
	return s
}
