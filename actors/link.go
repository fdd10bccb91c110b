package actors

// link.go is the host's end of a sandbox's link (SPEC §7): frames from the
// box, bounded on the host (admission, byte budget, capped error text), and
// the errors sent back. sandbox.go starts and stops the sandbox itself.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// Handle implements jsonrpc2.Handler. Notifications are handled in order on
// the reader goroutine; requests run concurrently, bounded by slots. What
// requests hold on the host is bounded: an unknown method, or a request
// beyond maxRunning+maxQueued or the byte budget, is refused on the reader
// goroutine without keeping its frame (refuse: once maxRefusing refusals
// wait on a full link, the reader reads nothing more: back-pressure,
// bounded by linkWriteBound). A panic on the reader or in a request's
// goroutine answers the request (if any) with an internal error and ends
// the sandbox (fail), never the process.
func (s *sandbox) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	defer guard(s.log, "the sandbox link's reader", func(any) {
		if !req.Notif {
			s.refuse(ctx, conn, req.ID, internalLinkError()) // not written from the reader: see refuse
		}
		s.fail()
	})
	if req.Notif {
		s.handleNotification(req)
		return
	}
	if !isBoxMethod(req.Method) {
		s.dropped("request for an unknown method", req.Method)
		s.refuse(ctx, conn, req.ID, &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: fmt.Sprintf("Unknown method %q", clip(req.Method, maxEcho))})
		return
	}
	size := int64(len(req.Method))
	if req.Params != nil {
		size += int64(len(*req.Params))
	}
	if !s.admit(size) {
		s.dropped("request over the in-flight bounds", req.Method)
		s.refuse(ctx, conn, req.ID, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, fmt.Sprintf(
			"Too many requests in flight from this sandbox (at most %d running and %d waiting, %d MiB of params); wait for some to finish",
			maxRunning, maxQueued, s.budget>>20)))
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// Deferred before the releases, so it runs after them. The answer
		// goes first: the sandbox's end would cut it off.
		defer guard(s.log, "a request from the sandbox", func(any) {
			s.replyError(ctx, conn, req.ID, internalLinkError())
			s.fail()
		})
		defer s.release(size)
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-s.slots }()
		s.panicAt("box request")
		result, err := s.serveRequest(ctx, req)
		if err != nil {
			s.replyError(ctx, conn, req.ID, err)
			return
		}
		if err := conn.Reply(ctx, req.ID, result); err != nil && errors.Is(err, protocol.ErrFrameTooLarge) {
			s.replyError(ctx, conn, req.ID, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, err.Error()))
		}
	}()
}

// admit reserves room for one request of size bytes; false when the
// request would exceed the count or byte bounds. One request is always
// admitted when nothing else is held, whatever its size (it is within the
// frame cap).
func (s *sandbox) admit(size int64) bool {
	select {
	case s.admitted <- struct{}{}:
	default:
		return false
	}
	if held := s.held.Add(size); held > s.budget && held != size {
		s.release(size)
		return false
	}
	return true
}

func (s *sandbox) release(size int64) {
	s.held.Add(-size)
	<-s.admitted
}

// replyError sends err to the sandbox with its message capped at
// maxErrorText.
func (s *sandbox) replyError(ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, err error) {
	var rpcErr *jsonrpc2.Error
	if !errors.As(err, &rpcErr) {
		rpcErr = LinkError(protocol.CodeServerError, protocol.KindServerError, err.Error())
	}
	if len(rpcErr.Message) > maxErrorText {
		c := *rpcErr
		c.Message = clip(c.Message, maxErrorText)
		rpcErr = &c
	}
	_ = conn.ReplyWithError(ctx, id, rpcErr)
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… [%d bytes cut]", s[:cut], len(s)-cut)
}

// panicAt is SandboxConfig.panicAt; a sandbox built by hand (unit tests)
// has no config.
func (s *sandbox) panicAt(site string) {
	if s.cfg != nil {
		s.cfg.panicAt.at(site)
	}
}

// internalLinkError answers a request whose handler panicked.
func internalLinkError() *jsonrpc2.Error {
	return LinkError(protocol.CodeServerError, protocol.KindServerError,
		"Internal error in the bridge while serving this request (see the bridge's log); the session is restarted")
}

func (s *sandbox) handleNotification(req *jsonrpc2.Request) {
	switch req.Method {
	case protocol.MethodReady:
		var p protocol.ReadyParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
			s.dropped("invalid ready frame", "")
			return
		}
		s.readyOnce.Do(func() {
			s.info = p
			close(s.ready)
		})
	case protocol.MethodOutput:
		s.panicAt("box output")
		var p protocol.OutputParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil ||
			(p.Stream != result.StreamStdout && p.Stream != result.StreamStderr) {
			s.dropped("invalid output frame", "")
			return
		}
		a := s.active.Load()
		if a == nil || a.scope.Call != p.Call {
			s.dropped("output outside the active call", fmt.Sprintf("call %d, %d bytes", p.Call, len(p.Data)))
			return
		}
		a.add(p.Stream, p.Data)
	case protocol.MethodImage, protocol.MethodProgress:
		s.handleMedia(req)
	case protocol.MethodAck:
		s.handleAck(req.Params)
	default:
		s.dropped("unknown notification", req.Method)
	}
}

// addOutput adds the output an exec reply carries (ExecResult.Output) to
// its call, as output notifications would have; a chunk of another stream
// is dropped as an invalid output frame is.
func (s *sandbox) addOutput(a *activeCall, chunks []protocol.OutputChunk) {
	for _, c := range chunks {
		if c.Stream != result.StreamStdout && c.Stream != result.StreamStderr {
			s.dropped("invalid output frame", "")
			continue
		}
		a.add(c.Stream, c.Data)
	}
}

// serveRequest answers one box→host request. A request with a job token
// in its meta is served with the scope the host bound to that token
// (jobScopes), whether or not a call is active; any other request belongs
// to the active call.
func (s *sandbox) serveRequest(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	if s.life != nil { // nil only in unit tests that build a sandbox by hand
		ctx = s.life
	}
	if h, ok := durableMethods[req.Method]; ok {
		// The sandbox's own: bound to its session, with or without a call
		// (an upload goes on after its cell's result) or a job's token.
		return h(s, params)
	}
	tok, err := jobToken(req)
	if err != nil {
		return nil, err
	}
	if tok != "" && req.Method != protocol.MethodReset {
		scope, ok := s.jobs.lookup(tok)
		if !ok {
			return nil, errUnknownJob
		}
		if req.Method == protocol.MethodJobScope { // a job's own job: the same grant
			return protocol.JobScopeResult{Token: tok}, nil
		}
		scope.progress, scope.human = jobSink{s}, jobSink{s}
		return s.cfg.Router.ServeSandbox(ctx, scope, req.Method, params)
	}
	a := s.active.Load()
	if a == nil {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable,
			"No run_python call is active in this session: call tools from a job's own thread (runtime.start), or within a call")
	}
	switch req.Method {
	case protocol.MethodReset:
		a.mu.Lock()
		a.reset = true
		a.mu.Unlock()
		s.forgetSnapshot() // a fresh, empty session: not one restored
		return struct{}{}, nil
	case protocol.MethodJobScope:
		if err := decodeParams(req.Method, params, &struct{}{}); err != nil {
			return nil, err
		}
		return protocol.JobScopeResult{Token: s.jobs.issue(a.scope)}, nil
	}
	scope := a.scope
	scope.progress, scope.human = a, a
	if a.ctx != nil { // nil only in unit tests that build a call by hand
		ctx = a.ctx
	}
	return s.cfg.Router.ServeSandbox(ctx, scope, req.Method, params)
}

// LinkError builds a link error with data.kind (LNK-6).
func LinkError(code int64, kind, msg string) *jsonrpc2.Error {
	e := &jsonrpc2.Error{Code: code, Message: msg}
	e.SetError(protocol.ErrorData{Kind: kind})
	return e
}

// LinkErrorOf reads err back as LinkError built it: its code and
// data.kind ("" when it has none); ok is false for any other error.
func LinkErrorOf(err error) (code int64, kind string, ok bool) {
	var le *jsonrpc2.Error
	if !errors.As(err, &le) {
		return 0, "", false
	}
	var d protocol.ErrorData
	if le.Data != nil && json.Unmarshal(*le.Data, &d) == nil {
		kind = d.Kind
	}
	return le.Code, kind, true
}

// linkLogger is jsonrpc2's logger for a sandbox's link. jsonrpc2 logs a
// reply that answers no pending request, which a cell can forge as fast as
// the link carries it: that is a dropped frame. Anything else is logged at
// debug level, its sandbox-supplied text bounded.
type linkLogger struct{ s *sandbox }

func (l linkLogger) Printf(format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	if strings.Contains(format, "no corresponding request") {
		l.s.dropped("reply to no pending request", msg)
		return
	}
	l.s.log.Debug().Msg(printable.Log(msg))
}
