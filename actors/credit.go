package actors

import (
	"context"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// CreditLink is a Link whose transport buffers more than its write
// deadline can see (protocol/credit.go): the sandbox is asked to
// acknowledge what it reads, and the link's writes wait for credit, within
// the same deadline, once Window bytes are unacknowledged.
type CreditLink interface {
	Link
	// Window is the most the host keeps written and unacknowledged.
	Window() int
	// Ack records that the sandbox has read n bytes in all since the boot
	// frame; it never blocks.
	Ack(n int64)
}

// bootParams is the boot frame's params for a sandbox on link.
func bootParams(cfg *SandboxConfig, link Link) protocol.BootParams {
	p := cfg.Boot
	if c, ok := link.(CreditLink); ok {
		p.Limits.LinkWindow = c.Window()
	}
	return p
}

// handleAck passes an ack notification to a credit link; on any other link
// it is a dropped frame, as any unknown notification is.
func (s *sandbox) handleAck(params *json.RawMessage) {
	c, ok := s.box.Link().(CreditLink)
	if !ok {
		s.dropped("unknown notification", protocol.MethodAck)
		return
	}
	var p protocol.AckParams
	if params == nil || json.Unmarshal(*params, &p) != nil {
		s.dropped("invalid ack frame", "")
		return
	}
	c.Ack(p.Bytes)
}

// maxRefusing bounds the refusals that wait to be written at once. A
// sandbox's own runtime never has more requests in flight than the host
// admits, so only a hostile one reaches it.
const maxRefusing = maxRunning + maxQueued

// refuse answers a refused request from its own goroutine, so the reader
// goroutine never waits on the link for it: on a credit link only the
// reader can read the acks a waiting write needs (a sandbox that reads
// every byte would otherwise be declared dead when a refusal met a large
// write). Once maxRefusing refusals wait, the reader waits for a slot and
// reads nothing more from the sandbox: back-pressure on a flood of refused
// requests, bounded by linkWriteBound on the waiting writes.
func (s *sandbox) refuse(ctx context.Context, conn *jsonrpc2.Conn, id jsonrpc2.ID, err error) {
	select {
	case s.refusing <- struct{}{}:
	case <-ctx.Done():
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.refusing }()
		s.replyError(ctx, conn, id, err)
	}()
}
