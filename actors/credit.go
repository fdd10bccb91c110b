package actors

import (
	"encoding/json"

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
