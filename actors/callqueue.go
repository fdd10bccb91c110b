package actors

import "time"

// callQueue is a session's waiting calls in arrival order, with one timer
// armed on the earliest deadline among them, wherever that call is: a call
// queued behind a longer one still times out at its own deadline (TMO-1).
// It belongs to the session's Serve goroutine.
type callQueue struct {
	reqs  []*ExecRequest
	timer *time.Timer // nil when the queue is empty
}

func (q *callQueue) len() int { return len(q.reqs) }

// push appends req.
func (q *callQueue) push(req *ExecRequest) {
	q.reqs = append(q.reqs, req)
	q.rearm()
}

// pop removes and returns the oldest call; nil when there is none.
func (q *callQueue) pop() *ExecRequest {
	if len(q.reqs) == 0 {
		return nil
	}
	req := q.reqs[0]
	q.reqs = q.reqs[1:]
	q.rearm()
	return req
}

// due fires when the earliest deadline has come; nil (never) when empty.
func (q *callQueue) due() <-chan time.Time {
	if q.timer == nil {
		return nil
	}
	return q.timer.C
}

// expire removes and returns the calls whose deadline is not after now,
// keeping the others in order.
func (q *callQueue) expire(now time.Time) []*ExecRequest {
	var gone []*ExecRequest
	kept := q.reqs[:0]
	for _, req := range q.reqs {
		if req.Deadline.After(now) {
			kept = append(kept, req)
		} else {
			gone = append(gone, req)
		}
	}
	clear(q.reqs[len(kept):])
	q.reqs = kept
	q.rearm()
	return gone
}

// drain removes and returns every call and disarms the timer.
func (q *callQueue) drain() []*ExecRequest {
	reqs := q.reqs
	q.reqs = nil
	q.rearm()
	return reqs
}

// rearm arms the timer on the earliest deadline, or disarms it when empty.
func (q *callQueue) rearm() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	if len(q.reqs) == 0 {
		return
	}
	first := q.reqs[0].Deadline
	for _, req := range q.reqs[1:] {
		if req.Deadline.Before(first) {
			first = req.Deadline
		}
	}
	q.timer = time.NewTimer(time.Until(first))
}
