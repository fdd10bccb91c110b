package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// signInError returns the sign-in error in err's chain (engine/oauth's
// RequiredError, found by its Fix method so actors need not import it) on
// its own: the transport's wrapping would repeat the URL around the one
// line that names the fix. Other errors come back unchanged.
func signInError(err error) error {
	if s := asSignIn(err); s != nil {
		return s
	}
	return err
}

// asSignIn is the sign-in error in err's chain; nil when there is none.
func asSignIn(err error) error {
	var s interface {
		error
		Fix() string
	}
	if errors.As(err, &s) {
		return s
	}
	return nil
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

// CannotAskURL reports whether ctx belongs to a call whose MCP client did
// not declare URL-mode elicitation: a person is there, but no sign-in link
// can reach them. False for a request outside any call.
func CannotAskURL(ctx context.Context) bool {
	ic := innerFrom(ctx)
	return ic != nil && ic.src != nil && !CanAskURL(ctx)
}

// AskURL sends url to the person behind ctx's call as a URL-mode
// elicitation (RelayInput: named by the server and tool, within bound and
// the call's life) and reports whether they accepted to open it.
func AskURL(ctx context.Context, bound time.Duration, message, url, id string) bool {
	res := RelayInput(ctx, bound, mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, Message: message, URL: url, ElicitationID: id})
	return res != nil && res.Action == mcp.ElicitationResponseActionAccept
}

// signingIn runs use, and when its failure asks for a sign-in that ctx's
// call can do (signInFor), signs in and runs it once more.
func (c *Client) signingIn(ctx context.Context, use func(context.Context) (useReply, error)) (useReply, error) {
	r, err := use(ctx)
	if err == nil {
		return r, nil
	}
	signedIn, failed := c.signInFor(ctx, err)
	switch {
	case signedIn:
		return use(ctx)
	case failed != nil:
		// The sign-in's own failure (no answer in time, a declined link)
		// says more than the start's "needs sign-in".
		if asSignIn(failed) != nil {
			return r, asSignIn(failed)
		}
		return r, fmt.Errorf("Server '%s': %w", c.spec.Name, failed)
	case CannotAskURL(ctx):
		// The start failed where no one could be asked; this call has a
		// person whose client takes no links, which the error then says.
		var nl interface{ WithoutLinks() error }
		if errors.As(err, &nl) {
			return r, nl.WithoutLinks()
		}
	}
	return r, err
}

// signInFor signs in to c's server within ctx's call when err, the start's
// failure, asks for a sign-in and the call's client can open a link; it
// reports whether a sign-in succeeded (the caller then uses the server
// again), or why the one it tried failed. At most one try per run_python
// call and server, so a declined link is not asked again by every call of a
// loop; the server's Interaction bounds the wait.
func (c *Client) signInFor(ctx context.Context, err error) (signedIn bool, failed error) {
	if c.spec.SignIn == nil || asSignIn(err) == nil || !CanAskURL(ctx) {
		return false, nil
	}
	if asks := innerFrom(ctx).src.current(); !asks.firstSignIn(c.spec.Name) {
		return false, nil
	}
	if err := c.spec.SignIn(ctx); err != nil {
		c.log.Warn().Err(signInError(err)).Msg("sign-in through the client failed")
		return false, err
	}
	c.log.Info().Msg("signed in through the client; starting the server again")
	return true, nil
}

// firstSignIn reports whether server's sign-in was not yet tried in this
// call, and marks it tried.
func (a *approvals) firstSignIn(server string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.signIns == nil {
		a.signIns = map[string]bool{}
	}
	first := !a.signIns[server]
	a.signIns[server] = true
	return first
}
