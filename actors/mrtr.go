package actors

// mrtr.go follows what a modern server (2026-07-28, era.go) may answer
// instead of a final result:
//
//   - resultType "input_required" (multi round-trip requests): the server
//     asks the user through its inputRequests. Each is relayed to the
//     human of the inner call, as a legacy elicitation/create or
//     sampling/createMessage would be (relay.go: the same attribution,
//     caps and approvals), and the request is sent again with the answers
//     and the server's requestState. The loop is the bridge's own, capped
//     at MaxInputRounds rounds.
//   - resultType "task" (the io.modelcontextprotocol/tasks extension, which
//     the bridge declares on every modern request): tools/call became a
//     task, polled with tasks/get until it ends; its status goes to the
//     call's progress, its input requests are relayed and answered with
//     tasks/update, and an abandoned task is cancelled with tasks/cancel.
//
// To the sandbox it is one call either way.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// exchange is one request of an inner call to a modern server, as it is
// retried: the id in flight (for notifications/cancelled) and the task it
// became ("": none yet; for tasks/cancel).
type exchange struct {
	conn   *serverConn
	method string
	params any
	id     mcp.RequestId
	task   string
}

// modernHead is the part of a modern result that says what it is.
type modernHead struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  *string                    `json:"requestState"`
}

// follow turns res, the first result of x, into the final one: it answers
// input_required rounds and follows a task. A legacy server's result is
// returned as it is.
func (x *exchange) follow(ctx context.Context, res json.RawMessage, onProgress func(UpstreamProgress)) (json.RawMessage, error) {
	if x.conn.protocol() == "" {
		return res, nil
	}
	for round := 1; ; round++ {
		var head modernHead
		if json.Unmarshal(res, &head) != nil {
			return res, nil // the caller names an unusable result
		}
		switch head.ResultType {
		case string(mcp.ResultTypeInputRequired):
		case "task":
			if x.method != string(mcp.MethodToolsCall) {
				return nil, fmt.Errorf("%s: the server answered with a task, which only tools/call may become", x.method)
			}
			return x.followTask(ctx, res, onProgress)
		default:
			return res, nil
		}
		if round > MaxInputRounds {
			return nil, fmt.Errorf("%s: the server asked for input %d times in one request, the cap; the request was ended", x.method, MaxInputRounds)
		}
		answers, err := x.conn.answer(ctx, head.InputRequests)
		if err != nil {
			return nil, err
		}
		retry := map[string]any{"inputResponses": answers}
		if head.RequestState != nil {
			retry["requestState"] = *head.RequestState
		}
		x.id = x.conn.nextID()
		if res, err = x.conn.requestID(ctx, x.id, x.method, withFields(x.params, retry)); err != nil {
			return nil, err
		}
	}
}

// withFields is params (an object) with fields set on it.
func withFields(params any, fields map[string]any) any {
	out := map[string]json.RawMessage{}
	if raw, err := json.Marshal(params); err == nil {
		_ = json.Unmarshal(raw, &out)
	}
	for k, v := range fields {
		if raw, err := json.Marshal(v); err == nil {
			out[k] = raw
		}
	}
	return out
}

// inputRequest is one entry of a server's inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// answer relays a server's input requests, one at a time in key order, to
// the human of the inner call of ctx, and returns the answers by key. An
// elicitation nobody answers is declined, as a legacy one is; a question
// the bridge cannot answer at all (sampling without a human, roots, an
// unknown method) ends the request with an error saying so.
func (s *serverConn) answer(ctx context.Context, requests map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	ic := innerFrom(ctx)
	out := make(map[string]json.RawMessage, len(requests))
	keys := make([]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		var req inputRequest
		if err := json.Unmarshal(requests[key], &req); err != nil {
			return nil, fmt.Errorf("Server '%s' sent an input request %q that is not a request object", s.name, printable.Log(clip(key, 40)))
		}
		res, err := s.answerOne(ctx, ic, req)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		out[key] = raw
	}
	return out, nil
}

// declineAnswer is an elicitation's decline.
var declineAnswer = json.RawMessage(`{"action":"decline"}`)

// answerOne relays one input request (answer).
func (s *serverConn) answerOne(ctx context.Context, ic *innerCall, req inputRequest) (any, error) {
	var what string
	var declared bool
	var f relayFunc
	switch req.Method {
	case string(mcp.MethodElicitationCreate):
		what, declared, f = "elicitation", s.declared.Form || s.declared.URL, s.relayElicitationRaw
	case string(mcp.MethodSamplingCreateMessage):
		what, declared, f = "sampling", s.declared.Sampling, s.relaySampling
	case string(mcp.MethodListRoots):
		return nil, fmt.Errorf("Server '%s' asked for the client's roots (roots/list), which the bridge does not offer servers", s.name)
	default:
		return nil, fmt.Errorf("Server '%s' sent an input request of an unknown kind (%s)", s.name, printable.Log(clip(req.Method, 60)))
	}
	if !declared || ic == nil {
		if what == "sampling" {
			return nil, fmt.Errorf("Server '%s' asked for sampling, which your MCP client did not declare", s.name)
		}
		ic.note(fmt.Sprintf("Server '%s' asked for input (%s), which your MCP client did not declare; it was declined", s.name, what))
		return declineAnswer, nil
	}
	base := s.life
	if base == nil {
		base = context.WithoutCancel(ctx)
	}
	res, err := ic.ask(base, s.relayBound, what, func(ctx context.Context, asks *approvals) (any, string, error) {
		return f(ctx, ic, asks, req.Params)
	})
	if err == nil {
		return res, nil
	}
	if what == "sampling" {
		return nil, fmt.Errorf("Server '%s' asked for sampling, and it was not relayed to a user", s.name)
	}
	return declineAnswer, nil // noted by ask
}

// modernTask is a 2026-07-28 task as tasks/get (and a task result) give
// it.
type modernTask struct {
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	PollIntervalMs *int64                     `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result"`
	Error          *taskError                 `json:"error"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
}

type taskError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// followTask polls the task res created until it ends, and returns its
// result. Its status goes to onProgress; its input requests are relayed
// once each (a key stays outstanding across polls until the server sees
// the answer) and answered with tasks/update.
func (x *exchange) followTask(ctx context.Context, res json.RawMessage, onProgress func(UpstreamProgress)) (json.RawMessage, error) {
	var t modernTask
	if err := json.Unmarshal(res, &t); err != nil || t.TaskID == "" {
		return nil, errors.New("tools/call: the server's task result has no taskId")
	}
	x.task = t.TaskID
	s := x.conn
	answered := map[string]bool{}
	last := ""
	for {
		if key := t.Status + "\x00" + t.StatusMessage; onProgress != nil && t.Status != "" && key != last {
			last = key
			onProgress(UpstreamProgress{Status: t.Status, Message: t.StatusMessage})
		}
		switch t.Status {
		case "completed":
			if len(t.Result) == 0 {
				return nil, errors.New("tools/call: the server's task completed without a result")
			}
			x.task = ""
			return t.Result, nil
		case "failed":
			x.task = ""
			if t.Error == nil {
				return nil, &rpcError{method: "tools/call", msg: "the task failed: " + t.StatusMessage, code: mcp.INTERNAL_ERROR}
			}
			return nil, &rpcError{method: "tools/call", msg: t.Error.Message, code: t.Error.Code}
		case "cancelled":
			x.task = ""
			return nil, fmt.Errorf("tools/call: the server cancelled the task: %s", printable.Log(clip(t.StatusMessage, 200)))
		case "input_required":
			if err := x.updateTask(ctx, t, answered); err != nil {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollInterval(t.PollIntervalMs)):
		}
		pctx, cancel := context.WithTimeout(ctx, taskPollBound)
		raw, err := s.request(pctx, "tasks/get", map[string]any{"taskId": t.TaskID})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var rpcErr *rpcError
			if errors.As(err, &rpcErr) {
				return nil, err // the server no longer knows the task
			}
			continue // a lost poll: the next one decides
		}
		var next modernTask
		if json.Unmarshal(raw, &next) != nil {
			return nil, errors.New("tasks/get: the server's task is not an object")
		}
		next.TaskID = t.TaskID
		t = next
	}
}

// updateTask answers the input requests of t not answered yet, with one
// tasks/update.
func (x *exchange) updateTask(ctx context.Context, t modernTask, answered map[string]bool) error {
	pending := map[string]json.RawMessage{}
	for k, v := range t.InputRequests {
		if !answered[k] {
			pending[k] = v
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if len(answered)+len(pending) > MaxInputRounds {
		return fmt.Errorf("tools/call: the server's task asked for input more than %d times, the cap; the call was ended", MaxInputRounds)
	}
	answers, err := x.conn.answer(ctx, pending)
	if err != nil {
		return err
	}
	for k := range pending {
		answered[k] = true
	}
	_, err = x.conn.request(ctx, "tasks/update", map[string]any{"taskId": t.TaskID, "inputResponses": answers})
	return err
}

// cancel tells the server the bridge abandoned x: tasks/cancel for a task,
// else notifications/cancelled for the request in flight.
func (x *exchange) cancel(reason string) {
	if x.task != "" {
		x.conn.cancelTask(x.task)
		return
	}
	x.conn.cancelRequest(x.id, reason)
}
