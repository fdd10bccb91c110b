package actors

import (
	"context"
	"encoding/json"
	"net"
	"strings"
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

// creditConn is a net.Conn that records acks, as a CreditLink.
type creditConn struct {
	net.Conn
	acks []int64
}

func (c *creditConn) Window() int { return 4096 }
func (c *creditConn) Ack(n int64) { c.acks = append(c.acks, n) }

// TestCreditLinkBootAndAcks: only a credit link's boot frame asks for acks,
// and only a credit link gets them; elsewhere an ack is a dropped frame.
func TestCreditLinkBootAndAcks(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cfg := &SandboxConfig{Boot: protocol.BootParams{Limits: protocol.Limits{MaxFrameBytes: 1 << 20}}}
	cl := &creditConn{Conn: a}
	if got, want := bootParams(cfg, cl).Limits.LinkWindow, 4096; got != want {
		t.Errorf("credit link: boot window %d, want %d", got, want)
	}
	if got := bootParams(cfg, a).Limits.LinkWindow; got != 0 {
		t.Errorf("plain link: boot window %d, want 0", got)
	}
	params := json.RawMessage(`{"bytes":12345}`)
	s := &sandbox{log: zerolog.Nop(), box: &pipeBox{host: cl}}
	s.handleAck(&params)
	if len(cl.acks) != 1 || cl.acks[0] != 12345 {
		t.Errorf("acks %v, want [12345]", cl.acks)
	}
	var logs strings.Builder
	s = &sandbox{log: zerolog.New(&logs), box: &pipeBox{host: a}}
	s.handleAck(&params) // outside a call: reported at once
	if !strings.Contains(logs.String(), `"unknown notification":1`) {
		t.Errorf("an ack on a plain link: log %q, want it counted as an unknown notification", logs.String())
	}
}
