package actors

// guard.go is the last guard of the bridge's goroutines that handle what an
// upstream server or a sandbox sent (issue 34): a panic there ends that
// server connection or that session, never the process. Serve methods need
// none: suture recovers a panicking actor and runs it again.

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// maxPanicStack bounds the stack a panic logs: the frames nearest the
// panic come first, and a deep recursion must not make one log line
// megabytes long.
const maxPanicStack = 16 << 10

// errInternal is what a caller sees of a panic that ended its request;
// the log has the rest.
var errInternal = errors.New("internal error (see the bridge's log)")

// guard recovers a panic of the goroutine it is deferred in, logs it once at
// error level with its stack, then calls onPanic (when not nil) with the
// panic's value. onPanic ends what the goroutine served (a connection, a
// sandbox) and sends what the goroutine still owed (an event, a reply), so
// nobody waits for it; it must not panic itself.
//
// It must be deferred directly (defer guard(...)): recover stops a panic
// only when called by the deferred function itself.
func guard(log zerolog.Logger, what string, onPanic func(v any)) {
	v := recover()
	if v == nil {
		return
	}
	stack := debug.Stack()
	if len(stack) > maxPanicStack {
		stack = append(stack[:maxPanicStack:maxPanicStack], "\n… [stack cut]"...)
	}
	// The value may quote what a server or a sandbox sent.
	log.Error().Str("panic", printable.Log(fmt.Sprint(v))).Str("stack", string(stack)).
		Msgf("internal error in %s; ending it", what)
	if onPanic != nil {
		onPanic(v)
	}
}

// panicHook injects a panic at a named site in tests (guard_test.go); nil,
// as in production, does nothing.
type panicHook func(site string)

func (h panicHook) at(site string) {
	if h != nil {
		h(site)
	}
}
