// Command fakehttp is an MCP server over HTTP, built with mcp-go, for the
// bridge's end-to-end tests of remote servers. It serves the tools echo,
// add and sleep (same behaviour as tests/fakeserver; with --trace-tool,
// trace too) over streamable HTTP
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
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/tests/faketools"
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
	traceTool := fs.Bool("trace-tool", false, "add the tool trace(), which returns the traceparent of its request's _meta and header")
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
	if *traceTool {
		s.AddTool(faketools.Tool("trace", "Return the traceparent of this request's _meta and HTTP header.", faketools.TraceSchema), faketools.Trace)
	}
	var (
		handler  http.Handler
		url      string
		shutdown func(context.Context) error
	)
	switch *transport {
	case "http":
		h := server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(faketools.WithTraceHeader))
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		handler, url, shutdown = mux, base+"/mcp", h.Shutdown
	case "sse":
		h := server.NewSSEServer(s, server.WithBaseURL(base), server.WithSSEContextFunc(faketools.WithTraceHeader))
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

func newServer(name string, structured bool) *server.MCPServer {
	s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(true), server.WithRecovery())
	s.AddTool(faketools.Tool("echo", "Return text, optionally repeated.", faketools.EchoSchema), faketools.Echo(structured))
	s.AddTool(faketools.Tool("add", "Add two numbers; returns JSON {\"sum\": a+b}.", faketools.AddSchema), faketools.Add)
	s.AddTool(faketools.Tool("sleep", "Sleep for the given number of seconds; ends early when cancelled.", faketools.SleepSchema), faketools.Sleep)
	return s
}
