package actors

// human.go is how a run_python call reaches the person behind it: through
// the MCP client that made the call (its elicitation and sampling), never
// through a process-wide "the client", so a bridge serving many clients
// asks the one whose call caused the question.

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// HumanCaps is what a call's client declared it can do for the bridge.
type HumanCaps struct {
	Form, URL bool // elicitation modes
	Sampling  bool
	// Missing says why Form is false, in words that name the fix; "" when
	// Form is true.
	Missing string
}

// Human asks the person behind one run_python call.
type Human interface {
	Caps() HumanCaps
	// Elicit sends elicitation/create and waits for the answer; ctx bounds
	// the wait.
	Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
	// Sample sends sampling/createMessage and waits for the answer.
	Sample(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)
}

type humanKey struct{}

// WithHuman attaches the person behind the call run under ctx.
func WithHuman(ctx context.Context, h Human) context.Context {
	return context.WithValue(ctx, humanKey{}, h)
}

// HumanFrom is the Human attached to ctx; nil when none is.
func HumanFrom(ctx context.Context) Human {
	if ctx == nil {
		return nil
	}
	h, _ := ctx.Value(humanKey{}).(Human)
	return h
}

// noElicitation is why a client without elicitation cannot be asked.
const noElicitation = "your MCP client did not declare elicitation"

// mcpHuman is the client of one MCP tools/call: call is that request's
// context, which carries its session, so every question goes to the
// client whose call caused it.
type mcpHuman struct {
	srv  *server.MCPServer
	call context.Context
}

// NewMCPHuman returns the Human behind the MCP request of ctx (the context
// mcp-go gives a tool handler); fallback serves when ctx carries no server.
func NewMCPHuman(ctx context.Context, fallback *server.MCPServer) Human {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		srv = fallback
	}
	return &mcpHuman{srv: srv, call: ctx}
}

func (h *mcpHuman) clientCaps() (mcp.ClientCapabilities, bool) {
	if info := server.RequestProtocolInfoFromContext(h.call); info != nil && info.Modern {
		return mcp.ClientCapabilities{}, true
	}
	if s, ok := server.ClientSessionFromContext(h.call).(server.SessionWithClientInfo); ok {
		return s.GetClientCapabilities(), false
	}
	return mcp.ClientCapabilities{}, false
}

func (h *mcpHuman) Caps() HumanCaps {
	caps, modern := h.clientCaps()
	if modern {
		// Protocol 2026-07-28 replaced server-initiated requests with
		// input_required results: the front asks such a client through
		// inputHuman (frontinput.go), never through this one.
		return HumanCaps{Missing: "your MCP client negotiated protocol 2026-07-28, which cannot be sent elicitation/create"}
	}
	return CapsOf(caps)
}

// during is the request context bounded also by ctx: it carries the
// session of the call, and ends when either ends.
func (h *mcpHuman) during(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancel(h.call)
	if dl, ok := ctx.Deadline(); ok {
		var c2 context.CancelFunc
		rctx, c2 = context.WithDeadline(rctx, dl)
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	stop := context.AfterFunc(ctx, cancel)
	return rctx, func() { stop(); cancel() }
}

func (h *mcpHuman) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if h.srv == nil {
		return nil, errors.New(noElicitation)
	}
	rctx, cancel := h.during(ctx)
	defer cancel()
	req.Method = string(mcp.MethodElicitationCreate)
	return h.srv.RequestElicitation(rctx, req)
}

func (h *mcpHuman) Sample(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	if h.srv == nil {
		return nil, errors.New("your MCP client did not declare sampling")
	}
	rctx, cancel := h.during(ctx)
	defer cancel()
	req.Method = string(mcp.MethodSamplingCreateMessage)
	return h.srv.RequestSampling(rctx, req)
}
