package actors

// tasks.go calls tools that require task augmentation (2025-11-25 tasks,
// execution.taskSupport "required"): tools/call with params.task returns a
// task; the bridge waits on tasks/result (which blocks until the task is
// terminal and returns what tools/call would have), polls tasks/get beside
// it to relay the task's status as progress, and cancels the task with
// tasks/cancel when the inner call is abandoned. To the sandbox it is one
// call.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Task polling bounds: a server's pollInterval is honoured within them, so
// a server cannot make the bridge poll in a busy loop nor go quiet for
// minutes; one tasks/get is bounded by taskPollBound.
const (
	taskPollDefault = time.Second
	taskPollMin     = 100 * time.Millisecond
	taskPollMax     = 5 * time.Second
	taskPollBound   = 5 * time.Second
	// taskTTLMargin is added to the call's timeout for the ttl the task
	// asks for: the server may drop the task once the bridge no longer
	// waits for it.
	taskTTLMargin = 30 * time.Second
)

// requiresTask reports whether a tool object says it must be called as a
// task (execution.taskSupport "required"). Optional tools are called
// plainly: the result is the same, without the polling.
func requiresTask(raw json.RawMessage) bool {
	var t struct {
		Execution *struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	return json.Unmarshal(raw, &t) == nil && t.Execution != nil && t.Execution.TaskSupport == string(mcp.TaskSupportRequired)
}

// toolCallTasks reports whether a server's capabilities accept task
// augmentation of tools/call; without it a client must not send tasks.
func toolCallTasks(caps mcp.ServerCapabilities) bool {
	return caps.Tasks != nil && caps.Tasks.Requests != nil && caps.Tasks.Requests.Tools != nil && caps.Tasks.Requests.Tools.Call != nil
}

// taskCalls maps the ids of a connection's tasks in flight to the inner
// call that created them ("server.tool"). A server request that carries
// _meta["io.modelcontextprotocol/related-task"] belongs to that call: the
// relay of a task's input_required elicitations attributes them with
// lookup (on stdio nothing else ties a server request to a call).
type taskCalls struct {
	mu   sync.Mutex
	byID map[string]string
}

func (t *taskCalls) add(id, label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID = map[string]string{}
	}
	t.byID[id] = label
}

func (t *taskCalls) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byID, id)
}

// lookup returns the inner call that created task id, if it is in flight.
func (t *taskCalls) lookup(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	label, ok := t.byID[id]
	return label, ok
}

// taskInfo is the part of a task object the bridge reads.
type taskInfo struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	PollInterval  *int64 `json:"pollInterval"`
}

// CallTask is Call for a tool that requires task augmentation: one await
// for the sandbox, with the task's status relayed to onProgress and the
// task cancelled (tasks/cancel) when the call is abandoned. A server that
// does not declare tasks for tools/call gets a plain call.
func (c *Client) CallTask(ctx context.Context, tool string, args json.RawMessage, timeout time.Duration, limit string, onProgress func(UpstreamProgress)) (json.RawMessage, error) {
	r, err := c.use(ctx)
	if err != nil {
		return nil, err
	}
	if !r.conn.toolTasks {
		return c.Call(ctx, tool, args, timeout, limit, onProgress)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	what := fmt.Sprintf("Tool call %s.%s", c.spec.Name, tool)
	id := r.conn.nextID()
	// The token stays valid until the task is terminal (2025-11-25), so
	// it is routed for the whole wait, not only the tools/call.
	token := fmt.Sprint(id.Value())
	if onProgress != nil {
		r.conn.progress.add(token, onProgress)
		defer r.conn.progress.remove(token)
	}
	// Registered for the questions the server asks while the task runs;
	// those naming the task go to this call (relay.go).
	cctx, untrack := r.conn.track(ctx, cctx, c.spec.Name, tool)
	defer untrack()
	r.conn.inflight.Add(1)
	defer r.conn.inflight.Add(-1)
	raw, err := r.conn.requestID(cctx, id, "tools/call", map[string]any{
		"name": tool, "arguments": args, "_meta": map[string]any{"progressToken": token},
		"task": map[string]any{"ttl": (timeout + taskTTLMargin).Milliseconds()}})
	if err != nil {
		return nil, c.failed(ctx, cctx, r.conn, err, what, timeout, limit, func(reason string) { r.conn.cancelRequest(id, reason) })
	}
	var created struct {
		Task *taskInfo `json:"task"`
	}
	if json.Unmarshal(raw, &created) != nil || created.Task == nil || created.Task.TaskID == "" {
		// The server ran the call without a task: this is its result.
		r.conn.served.Store(true)
		return raw, nil
	}
	task := created.Task
	r.conn.tasks.add(task.TaskID, c.spec.Name+"."+tool)
	defer r.conn.tasks.remove(task.TaskID)
	defer r.conn.BindTask(cctx, task.TaskID)()
	res, err := r.conn.awaitTask(cctx, task, onProgress)
	if err != nil {
		return nil, c.failed(ctx, cctx, r.conn, err, what, timeout, limit, func(string) { r.conn.cancelTask(task.TaskID) })
	}
	r.conn.served.Store(true)
	return res, nil
}

// awaitTask waits for task's result with tasks/result, polling tasks/get
// meanwhile to relay status changes to onProgress. It returns when the
// result comes or ctx ends, and never leaves the result request behind.
func (s *serverConn) awaitTask(ctx context.Context, task *taskInfo, onProgress func(UpstreamProgress)) (json.RawMessage, error) {
	type reply struct {
		raw json.RawMessage
		err error
	}
	results := make(chan reply, 1)
	go func() {
		// A panic ends the connection and this call with it.
		defer guard(s.log, "the wait for a task's result", func(any) {
			s.abort()
			results <- reply{err: errInternal} // 1-buffered, and nothing was sent
		})
		s.panicAt.at("tasks")
		raw, err := s.request(ctx, "tasks/result", map[string]any{"taskId": task.TaskID})
		results <- reply{raw, err}
	}()
	last := ""
	relay := func(t *taskInfo) {
		if onProgress == nil || t.Status == "" {
			return
		}
		if key := t.Status + "\x00" + t.StatusMessage; key != last {
			last = key
			onProgress(UpstreamProgress{Status: t.Status, Message: t.StatusMessage})
		}
	}
	relay(task)
	poll := time.NewTimer(pollInterval(task.PollInterval))
	defer poll.Stop()
	for {
		select {
		case r := <-results:
			return r.raw, r.err
		case <-poll.C:
			pctx, cancel := context.WithTimeout(ctx, taskPollBound)
			raw, err := s.request(pctx, "tasks/get", map[string]any{"taskId": task.TaskID})
			cancel()
			var t taskInfo
			if err == nil && json.Unmarshal(raw, &t) == nil {
				relay(&t)
				task.PollInterval = t.PollInterval
			}
			// A failed poll is not the call's failure: tasks/result
			// still decides.
			poll.Reset(pollInterval(task.PollInterval))
		}
	}
}

// pollInterval is a server's suggested interval (ms) within the bounds.
func pollInterval(ms *int64) time.Duration {
	if ms == nil || *ms <= 0 {
		return taskPollDefault
	}
	return min(max(time.Duration(*ms)*time.Millisecond, taskPollMin), taskPollMax)
}

// cancelTask asks the server to cancel task id, which the bridge abandoned.
// Best effort, bounded like notifications/cancelled.
func (s *serverConn) cancelTask(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelBound)
	defer cancel()
	_, _ = s.request(ctx, "tasks/cancel", map[string]any{"taskId": id})
}
