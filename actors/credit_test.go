package actors

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// TestRefusalsNeverBlockTheReader: with a link nobody reads, refusing a
// request never waits on the link on the reader goroutine (on a credit link
// only that goroutine reads the acks a waiting write needs), up to
// maxRefusing waiting refusals; the next one waits for a slot
// (back-pressure), and every one ends when the link closes.
func TestRefusalsNeverBlockTheReader(t *testing.T) {
	host, box := net.Pipe() // box is never read: every host write waits
	stream := protocol.NewLineStream(host, host, host, 1<<20, zerolog.Nop())
	s := &sandbox{
		log:      zerolog.Nop(),
		admitted: make(chan struct{}, maxRunning+maxQueued),
		refusing: make(chan struct{}, maxRefusing),
	}
	conn := jsonrpc2.NewConn(context.Background(), stream, s)
	ctx := context.Background()
	handled := func(i int) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Handle(ctx, conn, &jsonrpc2.Request{Method: "nope", ID: jsonrpc2.ID{Num: uint64(i)}})
		}()
		return done
	}
	for i := range maxRefusing {
		select {
		case <-handled(i):
		case <-time.After(5 * time.Second):
			t.Fatalf("refusal %d waited on the unread link", i)
		}
	}
	last := handled(maxRefusing)
	select {
	case <-last:
		t.Fatalf("refusal %d did not wait with %d refusals waiting", maxRefusing, maxRefusing)
	case <-time.After(200 * time.Millisecond):
	}
	_ = conn.Close()
	_ = box.Close()
	select {
	case <-last:
	case <-time.After(5 * time.Second):
		t.Fatal("a refusal outlived the link")
	}
	s.wg.Wait()
}
