package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// FrontConfig is what the front actor serves.
type FrontConfig struct {
	Name, Version string
	Tool          mcp.Tool
	Resource      mcp.Resource
	ResourceText  string
	Dispatcher    *Dispatcher
	Render        func(result.Result) *mcp.CallToolResult
	In            io.Reader
	Out           io.Writer
	Log           zerolog.Logger
	// Done is called when stdin reaches EOF: the bridge shuts down (LIF-1).
	Done func()
	// Structured is the MCP_BRIDGE_STRUCTURED policy; "" means auto.
	Structured string
	// Run, when set, runs a call in place of Dispatcher.Run (bridge serve
	// wraps it with per-principal limits, metrics and the access log).
	Run func(ctx context.Context, raw json.RawMessage) result.Result
	// OnInitialize gets the client's capabilities at initialize; nil: unused.
	OnInitialize func(mcp.ClientCapabilities)
}

// Front is the stdio MCP server actor. It is never restarted in-process
// (SUP-3): mcp-go cannot resume reading the same stdin.
type Front struct {
	cfg FrontConfig
	srv *server.MCPServer
	// The calls of 2026-07-28 clients held across input_required rounds
	// (frontinput.go), and their requestStates.
	inputs     *inputStates
	heldMu     sync.Mutex
	heldCalls  map[*heldCall]struct{}
	heldClosed bool
	heldWG     sync.WaitGroup
}

// NewFront builds the MCP server with its one tool and one resource.
func NewFront(cfg FrontConfig) *Front {
	hooks := &server.Hooks{}
	if cfg.OnInitialize != nil {
		hooks.AddAfterInitialize(func(_ context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
			cfg.OnInitialize(req.Params.Capabilities)
		})
		hooks.AddBeforeDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest) { declareModern(ctx, cfg) })
	}
	srv := server.NewMCPServer(cfg.Name, cfg.Version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithHooks(hooks),
	)
	f := &Front{cfg: cfg, srv: srv, inputs: newInputStates(), heldCalls: map[*heldCall]struct{}{}}
	srv.AddTool(cfg.Tool, f.callTool)
	srv.AddResource(cfg.Resource, f.readResource)
	return f
}

func (f *Front) String() string { return "front" }

// Server returns the MCP server, for in-process tests.
func (f *Front) Server() *server.MCPServer { return f.srv }

// Serve reads MCP messages until stdin ends or ctx is cancelled.
func (f *Front) Serve(ctx context.Context) error {
	stdio := server.NewStdioServer(f.srv)
	server.WithWorkerPoolSize(16)(stdio)
	server.WithQueueSize(128)(stdio)
	stdio.SetErrorLogger(log.New(zerologWriter{f.cfg.Log}, "", 0))
	defer f.Close()
	err := stdio.Listen(ctx, f.cfg.In, f.cfg.Out)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil || errors.Is(err, io.EOF) {
		f.cfg.Log.Info().Msg("stdin closed; shutting down")
		f.cfg.Done()
		return suture.ErrDoNotRestart
	}
	f.cfg.Log.Error().Err(err).Msg("front failed; exiting so the client restarts the bridge")
	return fmt.Errorf("%w: front: %v", suture.ErrTerminateSupervisorTree, err)
}

func (f *Front) callTool(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			f.cfg.Log.Error().Interface("panic", p).Msg("run_python panicked")
			res, err = f.shape(ctx, f.cfg.Render(result.Result{Status: result.StatusError, Error: fmt.Sprint(p), Internal: true, Session: result.DefaultSession})), nil
		}
	}()
	raw := req.Params.RawArguments
	if len(raw) == 0 && req.Params.Arguments != nil {
		if raw, err = json.Marshal(req.Params.Arguments); err != nil {
			msg := fmt.Sprintf("run_python arguments: %v", err)
			return f.shape(ctx, f.cfg.Render(result.Result{Status: result.StatusValidation, Error: msg, Session: result.DefaultSession})), nil
		}
	}
	run := f.cfg.Dispatcher.Run
	if f.cfg.Run != nil {
		run = f.cfg.Run
	}
	run = tracedRun(f.cfg.Tool.Name, req.Params.Meta, run)
	if info := modernRequest(ctx); info != nil {
		return f.callToolModern(ctx, req, raw, info, run), nil
	}
	ctx = WithHuman(ctx, NewMCPHuman(ctx, f.srv))
	if meta := req.Params.Meta; meta != nil && meta.ProgressToken != nil {
		ctx = WithProgress(ctx, f.progressSender(ctx, meta.ProgressToken))
	}
	return f.shape(ctx, f.cfg.Render(run(ctx, raw))), nil
}

// progressSender sends notifications/progress for token to the client of
// ctx (MCP-6). mcp-go queues them without blocking and drops them when the
// client's queue is full.
func (f *Front) progressSender(ctx context.Context, token mcp.ProgressToken) ProgressFunc {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		srv = f.srv
	}
	return func(n int, message string) {
		err := srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
			"progressToken": token, "progress": n, "message": message,
		})
		if err != nil {
			f.cfg.Log.Debug().Err(err).Msg("progress notification not sent")
		}
	}
}

func (f *Front) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	return []mcp.ResourceContents{mcp.TextResourceContents{
		URI: f.cfg.Resource.URI, MIMEType: "text/markdown", Text: f.cfg.ResourceText,
	}}, nil
}

// zerologWriter adapts a stdlib logger's output to zerolog.
type zerologWriter struct{ log zerolog.Logger }

func (w zerologWriter) Write(p []byte) (int, error) {
	w.log.Warn().Msg(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}
