// Command fakeserver is a stdio MCP server with failure modes, built with
// mcp-go, for the bridge's end-to-end tests (SPEC §17 "Fake servers").
//
// A test config entry looks like
//
//	{"command": "/path/fakeserver", "args": ["--mode", "noise", "--name", "noisy"]}
//
// Tools (all modes that serve at all):
//
//	echo(text, repeat?)  text repeated; structuredContent {"text": ...} with --structured
//	add(a, b)            text {"sum": a+b}
//	get-sum(a, b)        same as add, with a non-identifier name
//	sleep(seconds)       sleeps (ends early when the call is cancelled), "slept N"
//	fail(message?)       isError result carrying message
//	crash()              writes "crashing" to stderr, exits with status 3 mid-call
//	big(bytes)           one text block of exactly that many bytes, no newline
//	env(name)            value of that env var in this process ("" if unset)
//	cwd()                os.Getwd()
//	image()              one image block (a 1x1 PNG)
//	multi()              text "one" and an embedded text resource mem://x
//	add_tool(name)       registers a tool at runtime: notifications/tools/list_changed
//	counter()            1, 2, 3, ... per process (starts over after a restart)
//
// Resources (resources.go): mem://image, mem://big/{bytes}. Task tools
// (tasks.go): task_sleep(seconds) (task required), task_optional().
//
// Modes (--mode): normal (default), hang-init, crash-start, noise,
// stderr-flood, big-line, many-tools. Flags: --name, --tools N (extra tools
// tool_0000...; many-tools defaults to 2000), --structured, --sleep-start D,
// --pidfile PATH, and the test knobs --page-size, --workers, --flood-rate,
// --big-line-bytes, --ignore-sigterm, --ignore-eof (hang-init), --extra-tools
// a,b (tools by those exact names, "/" and "." allowed, answering "called a"),
// --cancel-log PATH (records each notifications/cancelled and tasks/cancel
// received), --trace-tool (adds trace(): the traceparent its request's
// _meta carried).
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/tests/faketools"
)

type options struct {
	mode          string
	name          string
	tools         int
	structured    bool
	sleepStart    time.Duration
	pidfile       string
	pageSize      int
	workers       int
	floodRate     int
	bigLineBytes  int
	ignoreSigterm bool
	ignoreEOF     bool
	extraTools    string
	ask           bool
	cancelLog     string
	traceTool     bool
	callLog       string
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("fakeserver", flag.ContinueOnError)
	fs.StringVar(&o.mode, "mode", "normal", "normal|hang-init|crash-start|noise|stderr-flood|big-line|many-tools")
	fs.StringVar(&o.name, "name", "fake", "server name reported in serverInfo")
	fs.IntVar(&o.tools, "tools", -1, "number of extra tools tool_0000... (many-tools default 2000, else 0)")
	fs.BoolVar(&o.structured, "structured", false, "echo also returns structuredContent {\"text\": ...} and declares an outputSchema")
	fs.DurationVar(&o.sleepStart, "sleep-start", 0, "sleep this long before serving")
	fs.StringVar(&o.pidfile, "pidfile", "", "write the process id to this file at start")
	fs.IntVar(&o.pageSize, "page-size", 0, "paginate list results with this page size (0: no pagination)")
	fs.IntVar(&o.workers, "workers", 32, "concurrent tool calls (mcp-go stdio worker pool size, max 100)")
	fs.IntVar(&o.floodRate, "flood-rate", 1<<20, "stderr-flood: bytes per second written to stderr")
	fs.IntVar(&o.bigLineBytes, "big-line-bytes", 10<<20, "big-line: size of the garbage line before the first response")
	fs.BoolVar(&o.ignoreSigterm, "ignore-sigterm", false, "ignore SIGTERM (only SIGKILL or SIGINT stop the process)")
	fs.BoolVar(&o.ignoreEOF, "ignore-eof", false, "hang-init: keep running after stdin is closed")
	fs.BoolVar(&o.ask, "ask", false, "serve ask: it asks the client's user for a name (elicitation/create), whatever the client declared")
	fs.StringVar(&o.callLog, "call-log", "", "append the name of each tool called to this file, one a line")
	fs.BoolVar(&o.traceTool, "trace-tool", false, "add the tool trace(), which returns the traceparent of its request's _meta")
	fs.StringVar(&o.extraTools, "extra-tools", "", "comma-separated names of extra tools that return \"called NAME\" (any characters but ',', e.g. admin/delete_all)")
	fs.StringVar(&o.cancelLog, "cancel-log", "", "append the params of each notifications/cancelled and tasks/cancel received to this file, one JSON object a line")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "fakeserver: unexpected arguments %q\n", fs.Args())
		return 2
	}
	switch o.mode {
	case "normal", "hang-init", "crash-start", "noise", "stderr-flood", "big-line", "many-tools":
	default:
		fmt.Fprintf(os.Stderr, "fakeserver: unknown --mode %q\n", o.mode)
		return 2
	}
	if o.tools < 0 {
		o.tools = 0
		if o.mode == "many-tools" {
			o.tools = 2000
		}
	}

	if o.ignoreSigterm {
		signal.Ignore(syscall.SIGTERM)
	}
	if o.pidfile != "" {
		if err := writePidfile(o.pidfile); err != nil {
			fmt.Fprintf(os.Stderr, "fakeserver: pidfile: %v\n", err)
			return 1
		}
	}
	if o.mode == "crash-start" {
		fmt.Fprintf(os.Stderr, "fakeserver %s: crash-start: exiting at start\n", o.name)
		return 1
	}
	if o.sleepStart > 0 {
		time.Sleep(o.sleepStart)
	}

	sigs := []os.Signal{syscall.SIGINT}
	if !o.ignoreSigterm {
		sigs = append(sigs, syscall.SIGTERM)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()

	if o.mode == "hang-init" {
		hangInit(ctx, o)
		return 0
	}
	if o.mode == "stderr-flood" {
		go floodStderr(ctx, o.floodRate)
	}

	var out io.Writer = os.Stdout
	switch o.mode {
	case "noise":
		nw := &injectWriter{w: os.Stdout, garbage: noiseLines, every: true}
		nw.inject() // garbage before anything else
		out = nw
	case "big-line":
		out = &injectWriter{w: os.Stdout, garbage: bigLine(o.bigLineBytes)}
	}

	s := newServer(o)
	stdio := server.NewStdioServer(s)
	stdio.SetErrorLogger(log.New(os.Stderr, "fakeserver "+o.name+": ", log.LstdFlags))
	server.WithWorkerPoolSize(o.workers)(stdio)
	var in io.Reader = os.Stdin
	if o.cancelLog != "" {
		r, err := newCancelLogReader(os.Stdin, o.cancelLog)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakeserver: cancel-log: %v\n", err)
			return 1
		}
		in = r
	}
	if err := stdio.Listen(ctx, in, out); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "fakeserver %s: %v\n", o.name, err)
		return 1
	}
	return 0
}

// writePidfile writes the pid atomically so a reader never sees a partial file.
func writePidfile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fakeserver-pid-*")
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(tmp, "%d\n", os.Getpid()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// hangInit reads stdin and never writes a byte to stdout. It returns at EOF
// unless --ignore-eof, and on SIGINT/SIGTERM unless those are ignored.
func hangInit(ctx context.Context, o options) {
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
		return
	case <-eof:
	}
	if o.ignoreEOF {
		<-ctx.Done()
	}
}

// floodStderr writes about rate bytes per second of log lines to stderr until
// ctx ends. A blocked stderr pipe blocks only this goroutine.
func floodStderr(ctx context.Context, rate int) {
	const tick = 10 * time.Millisecond
	perTick := max(rate/int(time.Second/tick), 1)
	t := time.NewTicker(tick)
	defer t.Stop()
	var seq int
	var buf bytes.Buffer
	pad := strings.Repeat(".", 80)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		buf.Reset()
		for buf.Len() < perTick {
			seq++
			fmt.Fprintf(&buf, "%s fake stderr flood line %09d %s\n", time.Now().Format(time.RFC3339Nano), seq, pad)
		}
		if _, err := os.Stderr.Write(buf.Bytes()); err != nil {
			return
		}
	}
}

// noiseLines is what --mode noise writes to stdout before the first line and
// between the server's own lines: text, a 1 KiB line, and truncated JSON.
var noiseLines = []byte("hello from stdout\n" + strings.Repeat("#", 1024) + "\n" + `{"jsonrpc":` + "\n")

func bigLine(n int) []byte {
	b := bytes.Repeat([]byte("x"), n+1)
	b[n] = '\n'
	return b
}

// injectWriter writes garbage lines to w between the lines that pass through
// it: before every line when every is set, else only before the first one.
// mcp-go writes each message with a single Write ending in '\n' (under its
// own write lock), so garbage never lands inside a message.
type injectWriter struct {
	mu      sync.Mutex
	w       io.Writer
	garbage []byte
	every   bool
	done    bool // garbage already written (every == false)
	midLine bool // the last Write did not end a line
}

func (iw *injectWriter) inject() {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	_, _ = iw.w.Write(iw.garbage)
}

func (iw *injectWriter) Write(p []byte) (int, error) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	if !iw.midLine && (iw.every || !iw.done) {
		if _, err := iw.w.Write(iw.garbage); err != nil {
			return 0, err
		}
		iw.done = true
	}
	n, err := iw.w.Write(p)
	iw.midLine = p[len(p)-1] != '\n'
	return n, err
}

func newServer(o options) *server.MCPServer {
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(false, false),
		server.WithTaskCapabilities(true, true, true),
		server.WithRecovery(),
	}
	if o.callLog != "" {
		hooks := &server.Hooks{}
		hooks.AddBeforeCallTool(func(_ context.Context, _ any, req *mcp.CallToolRequest) {
			f, err := os.OpenFile(o.callLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err == nil {
				fmt.Fprintln(f, req.Params.Name)
				f.Close()
			}
		})
		opts = append(opts, server.WithHooks(hooks))
	}
	if o.pageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(o.pageSize))
	}
	s := server.NewMCPServer(o.name, "1.0.0", opts...)
	registerTools(s, o)
	registerResources(s) // resources.go
	registerTaskTools(s) // tasks.go
	if o.ask {
		s.AddTool(tool("ask", "Ask the client's user for a name (elicitation/create, whatever the client declared).", emptySchema), askTool)
	}
	if o.traceTool {
		s.AddTool(tool("trace", "Return the traceparent of this request's _meta.", faketools.TraceSchema), faketools.Trace)
	}
	for _, name := range strings.Split(o.extraTools, ",") {
		if name != "" {
			s.AddTool(tool(name, "Extra tool named by --extra-tools.", emptySchema), calledTool(name))
		}
	}
	for i := 0; i < o.tools; i++ {
		name := fmt.Sprintf("tool_%04d", i)
		s.AddTool(mcp.NewToolWithRawSchema(name, manyToolDescription(i), json.RawMessage(manyToolSchema)),
			func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(name + ": " + req.GetString("query", "")), nil
			})
	}
	return s
}

const (
	failSchema = `{"type":"object","properties":{` +
		`"message":{"type":"string","description":"Error message to return."}}}`
	emptySchema = `{"type":"object","properties":{}}`
	bigSchema   = `{"type":"object","properties":{` +
		`"bytes":{"type":"integer","minimum":0,"description":"Exact size of the returned text, in bytes."}},` +
		`"required":["bytes"]}`
	envSchema = `{"type":"object","properties":{` +
		`"name":{"type":"string","description":"Environment variable name."}},` +
		`"required":["name"]}`
	addToolSchema = `{"type":"object","properties":{` +
		`"name":{"type":"string","description":"Name of the tool to add."}},` +
		`"required":["name"]}`
	manyToolSchema = `{"type":"object","properties":{` +
		`"query":{"type":"string","description":"Query text."},` +
		`"limit":{"type":"integer","description":"Maximum number of results."}},` +
		`"required":["query"]}`
)

func tool(name, desc, schema string) mcp.Tool { return faketools.Tool(name, desc, schema) }

func registerTools(s *server.MCPServer, o options) {
	echo := tool("echo", "Return text, optionally repeated.", faketools.EchoSchema)
	if o.structured {
		echo.RawOutputSchema = json.RawMessage(faketools.EchoOutputSchema)
	}
	var counter atomic.Int64

	s.AddTools(
		server.ServerTool{Tool: echo, Handler: faketools.Echo(o.structured)},
		server.ServerTool{Tool: tool("add", "Add two numbers; returns JSON {\"sum\": a+b}.", faketools.AddSchema), Handler: faketools.Add},
		server.ServerTool{Tool: tool("get-sum", "Same as add, under a name that is not an identifier.", faketools.AddSchema), Handler: faketools.Add},
		server.ServerTool{Tool: tool("sleep", "Sleep for the given number of seconds; ends early when cancelled.", faketools.SleepSchema), Handler: faketools.Sleep},
		server.ServerTool{Tool: tool("fail", "Return a tool error (isError true) with the given message.", failSchema), Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError(req.GetString("message", "failed")), nil
		}},
		server.ServerTool{Tool: tool("crash", "Exit the server process with status 3 in the middle of the call.", emptySchema), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "crashing")
			os.Exit(3)
			return nil, nil
		}},
		server.ServerTool{Tool: tool("big", "Return one text block of exactly the given number of bytes, on one line.", bigSchema), Handler: bigHandler},
		server.ServerTool{Tool: tool("env", "Return the value of an environment variable of the server process (\"\" if unset).", envSchema), Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name, err := req.RequireString("name")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(os.Getenv(name)), nil
		}},
		server.ServerTool{Tool: tool("cwd", "Return the working directory of the server process.", emptySchema), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			wd, err := os.Getwd()
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(wd), nil
		}},
		server.ServerTool{Tool: tool("image", "Return one image content block (a 1x1 PNG).", emptySchema), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent(pngBase64, "image/png")}}, nil
		}},
		server.ServerTool{Tool: tool("multi", "Return two content blocks: text \"one\" and an embedded text resource mem://x.", emptySchema), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				mcp.NewTextContent("one"),
				mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "mem://x", MIMEType: "text/plain", Text: "two"}),
			}}, nil
		}},
		server.ServerTool{Tool: tool("add_tool", "Register a new tool at runtime; the server sends notifications/tools/list_changed.", addToolSchema), Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name, err := req.RequireString("name")
			if err != nil || name == "" {
				return mcp.NewToolResultError("name is required"), nil
			}
			s.AddTool(tool(name, "Tool added at runtime by add_tool.", emptySchema), calledTool(name))
			return mcp.NewToolResultText("added " + name), nil
		}},
		server.ServerTool{Tool: tool("counter", "Return a per-process counter: 1 on the first call, then 2, 3, ...", emptySchema), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.FormatInt(counter.Add(1), 10)), nil
		}},
	)
}

// calledTool answers "called NAME".
func calledTool(name string) server.ToolHandlerFunc {
	return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("called " + name), nil
	}
}

func bigHandler(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n, err := req.RequireInt("bytes")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if n < 0 || n > 1<<30 {
		return mcp.NewToolResultError("bytes must be in [0, 1 GiB]"), nil
	}
	const pattern = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := bytes.Repeat([]byte(pattern), n/len(pattern)+1)[:n]
	return mcp.NewToolResultText(string(b)), nil
}

// pngBase64 is a valid 1x1 PNG, encoded once at start.
var pngBase64 = func() string {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}()

var descWords = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike
november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu invoice ledger
calendar weather archive metrics search upload download render compile deploy index backup restore
translate summarize classify geocode payment shipment inventory ticket message schedule`)

// manyToolDescription is a ~600-byte description, distinct per tool, with a
// unique keyword kwNNNN so search tests can target one tool.
func manyToolDescription(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tool %d of the many-tools catalog (keyword kw%04d). It handles", i, i)
	x := uint32(i)*2654435761 + 12345
	for b.Len() < 590 {
		x = x*1664525 + 1013904223
		b.WriteByte(' ')
		b.WriteString(descWords[int(x>>16)%len(descWords)])
	}
	b.WriteByte('.')
	return b.String()
}
