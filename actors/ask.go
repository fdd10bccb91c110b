package actors

import (
	"context"
	"errors"
)

// request is one message of a request/reply mailbox: the question and a
// 1-buffered channel the actor answers on exactly once, without blocking.
type request[Q, R any] struct {
	q     Q
	reply chan R
}

// answer replies to the request; it never blocks.
func (r request[Q, R]) answer(v R) { r.reply <- v }

// errStopped is ask's error when the actor's done channel closed before it
// took the request: it takes no more requests.
var errStopped = errors.New("actor stopped")

// ask sends q to an actor's unbuffered mailbox and waits for the answer.
// done (nil: never) is closed once the actor takes no more requests: a
// request it took is always answered, so after the send only ctx can end
// the wait. It returns errStopped or ctx.Err() when no answer came.
func ask[Q, R any](ctx context.Context, mailbox chan<- request[Q, R], done <-chan struct{}, q Q) (R, error) {
	var zero R
	reply := make(chan R, 1)
	select {
	case mailbox <- request[Q, R]{q, reply}:
	case <-done:
		return zero, errStopped
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
