package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestCallQueueDeadlines: the timer follows the earliest deadline wherever
// that call waits; expire takes exactly the calls that are due and keeps
// the rest in arrival order (TMO-1).
func TestCallQueueDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var q callQueue
		if q.due() != nil {
			t.Fatal("an empty queue has a timer")
		}
		first := newRequest(context.Background(), 20*time.Second)
		long := newRequest(context.Background(), 30*time.Second)
		short := newRequest(context.Background(), time.Second)
		for _, req := range []*ExecRequest{first, long, short} {
			q.push(req)
		}
		now := <-q.due()
		if got, want := now.Sub(start), time.Second; got != want {
			t.Errorf("the timer fired after %v, want %v (the last call's deadline)", got, want)
		}
		gone := q.expire(now)
		if len(gone) != 1 || gone[0] != short {
			t.Fatalf("expired %d calls, want only the short one", len(gone))
		}
		if got := q.pop(); got != first {
			t.Error("pop did not return the oldest call")
		}
		now = <-q.due()
		if got, want := now.Sub(start), 30*time.Second; got != want {
			t.Errorf("the timer fired after %v, want %v", got, want)
		}
		if gone := q.expire(now.Add(-time.Nanosecond)); len(gone) != 0 {
			t.Errorf("expired %d calls before their deadline", len(gone))
		}
		if gone := q.expire(now); len(gone) != 1 || gone[0] != long || q.len() != 0 {
			t.Errorf("expire at the deadline took %d calls, left %d; want the long one, none left", len(gone), q.len())
		}
		if q.due() != nil {
			t.Error("the timer stays armed on an empty queue")
		}
		q.push(newRequest(context.Background(), time.Second))
		if got := q.drain(); len(got) != 1 || q.due() != nil || q.len() != 0 {
			t.Errorf("drain returned %d calls; the queue keeps %d and a timer: %v", len(got), q.len(), q.due() != nil)
		}
	})
}
