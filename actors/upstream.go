package actors

// upstream.go is what travels with one upstream tools/call besides its
// result: the progress token it carries and the progress the server reports
// for it, and the notifications/cancelled sent when the bridge abandons it.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// UpstreamProgress is one notifications/progress a server sent for an
// inner call.
type UpstreamProgress struct {
	Progress float64
	Total    *float64
	Message  string
	// Status is a task's status (tasks.go): shown in place of the
	// numbers, with Message its status message.
	Status string
}

// progressRoutes maps the progress tokens of a connection's calls in flight
// to their receivers. A token is registered for the length of its call
// only: progress for a call that ended finds nothing and is dropped.
type progressRoutes struct {
	mu   sync.Mutex
	byID map[string]func(UpstreamProgress)
}

func (p *progressRoutes) add(token string, f func(UpstreamProgress)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byID == nil {
		p.byID = map[string]func(UpstreamProgress){}
	}
	p.byID[token] = f
}

func (p *progressRoutes) remove(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, token)
}

// deliver hands a notifications/progress to its call's receiver. It runs on
// the transport's reader goroutine: receivers must not block. A token the
// bridge never issued, or a malformed notification, is dropped.
func (p *progressRoutes) deliver(fields map[string]any) {
	token, ok := fields["progressToken"].(string)
	if !ok {
		return
	}
	progress, ok := fields["progress"].(float64)
	if !ok {
		return
	}
	u := UpstreamProgress{Progress: progress}
	if total, ok := fields["total"].(float64); ok {
		u.Total = &total
	}
	u.Message, _ = fields["message"].(string)
	p.mu.Lock()
	f := p.byID[token]
	p.mu.Unlock()
	if f != nil {
		f(u)
	}
}

// cancelBound bounds the write of a notifications/cancelled.
const cancelBound = time.Second

// cancelRequest tells the server to stop working on request id, which the
// bridge abandoned for reason. Best effort: a server that is gone or does
// not read gets nothing more.
func (s *serverConn) cancelRequest(id mcp.RequestId, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelBound)
	defer cancel()
	_ = s.tr.SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}},
		},
	})
}

// Why the inner calls of a call or a sandbox end early: the reasons sent
// upstream in notifications/cancelled.
var (
	errCallEnded    = errors.New("the run_python call ended (interrupted, cancelled or timed out)")
	errSandboxEnded = errors.New("the session ended")
)

// upstreamSink follows a call's inner calls (its proxied tool calls), keyed
// by inner call: began names one as it is sent ("server.tool"), upstream
// takes its progress, and ended drops what is pending for one that
// returned. ranOut says it returned because the time left in the run_python
// call ran out: it was still in flight when the call's deadline passed, and
// the timeout result names it.
type upstreamSink interface {
	began(key uint64, label string)
	upstream(key uint64, msg string)
	ended(key uint64, ranOut bool)
}

// innerCalls numbers inner calls for upstreamSink keys.
var innerCalls atomic.Uint64

// maxUpstreamMessage bounds the text of one upstream progress message: the
// server is not trusted to keep it short.
const maxUpstreamMessage = 512

// upstreamMessage is the progress line of an inner call as the run_python
// call's progress shows it: "{server}.{tool alias}: {progress}/{total}
// {message}", rendered printable (clients show it as it is, often on a
// terminal).
func upstreamMessage(label string, u UpstreamProgress) string {
	var b strings.Builder
	b.WriteString(label)
	b.WriteString(": ")
	if u.Status != "" {
		b.WriteString(clip(u.Status, 64))
	} else {
		b.WriteString(strconv.FormatFloat(u.Progress, 'g', -1, 64))
	}
	if u.Total != nil && u.Status == "" {
		b.WriteString("/")
		b.WriteString(strconv.FormatFloat(*u.Total, 'g', -1, 64))
	}
	if m := strings.TrimSpace(u.Message); m != "" {
		b.WriteString(" ")
		b.WriteString(clip(m, maxUpstreamMessage))
	}
	return printable.String(b.String())
}

// jobSink routes a background job's upstream progress to the call active in
// the sandbox when it arrives (the call that collects the job, if any);
// between calls it is dropped.
type jobSink struct{ s *sandbox }

func (j jobSink) upstream(key uint64, msg string) {
	if a := j.s.active.Load(); a != nil {
		a.upstream(key, msg)
	}
}

// began does not tell the active call: a job's tool calls are not what
// that call's cell waits on, and the job's scope has no deadline.
func (j jobSink) began(uint64, string) {}

func (j jobSink) ended(key uint64, _ bool) {
	if a := j.s.active.Load(); a != nil {
		a.ended(key, false)
	}
}
