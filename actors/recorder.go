package actors

import (
	"context"
	"encoding/json"
	"time"
)

// CallRecorder receives what one run_python call did, for the audit trail
// (engine/audit): each box→host request its code made and each approval
// decision. Its methods are called from the goroutines that serve the
// sandbox, concurrently; calls after the call's record was written (a
// background job's) are the recorder's to drop.
type CallRecorder interface {
	// Numbered gives the call's number in its session.
	Numbered(call int64)
	// Inner is one box→host request: method, its params, and what it
	// answered (res, or err), began at began and taking d.
	Inner(method string, params json.RawMessage, res any, err error, began time.Time, d time.Duration)
	// Approval is one decision on a gated tool call.
	Approval(server, tool, decision string)
}

type recorderKey struct{}

// WithRecorder attaches the recorder of the call run under ctx.
func WithRecorder(ctx context.Context, r CallRecorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// RecorderFrom is the CallRecorder attached to ctx; nil when none is.
func RecorderFrom(ctx context.Context) CallRecorder {
	if ctx == nil {
		return nil
	}
	r, _ := ctx.Value(recorderKey{}).(CallRecorder)
	return r
}
