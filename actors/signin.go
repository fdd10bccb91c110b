package actors

import (
	"context"
	"errors"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// signInError returns the sign-in error in err's chain (engine/oauth's
// RequiredError, found by its Fix method so actors need not import it) on
// its own: the transport's wrapping would repeat the URL around the one
// line that names the fix. Other errors come back unchanged.
func signInError(err error) error {
	var s interface {
		error
		Fix() string
	}
	if errors.As(err, &s) {
		return s
	}
	return err
}

// CanAskURL reports whether the call ctx belongs to (an inner call, while
// its run_python call is active) has a person behind an MCP client that
// declared URL-mode elicitation: someone a sign-in link can be sent to.
func CanAskURL(ctx context.Context) bool {
	ic := innerFrom(ctx)
	if ic == nil || ic.src == nil {
		return false
	}
	asks := ic.src.current()
	return asks != nil && asks.human != nil && asks.human.Caps().URL
}

// AskURL sends url to the person behind ctx's call as a URL-mode
// elicitation (RelayInput: named by the server and tool, within bound and
// the call's life) and reports whether they accepted to open it.
func AskURL(ctx context.Context, bound time.Duration, message, url, id string) bool {
	res := RelayInput(ctx, bound, mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, Message: message, URL: url, ElicitationID: id})
	return res != nil && res.Action == mcp.ElicitationResponseActionAccept
}
