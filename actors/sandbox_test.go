package actors

import (
	"context"
	"os/exec"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors/childproc"
)

// procBox is a test backend's sandbox: argv as a local child speaking the
// link on its stdin and stdout. remove stands for the container's removal.
type procBox struct {
	*childproc.Linked
	name   string
	remove func(ctx context.Context)
}

func (b *procBox) Name() string               { return b.name }
func (b *procBox) Link() Link                 { return b.Linked.Link() }
func (b *procBox) Remove(ctx context.Context) { b.remove(ctx) }

var _ Sandbox = (*procBox)(nil)

// startProcBox starts argv as a procBox.
func startProcBox(argv []string, name string, remove func(ctx context.Context)) (Sandbox, error) {
	l, err := childproc.StartLinked(exec.Command(argv[0], argv[1:]...), false, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return &procBox{Linked: l, name: name, remove: remove}, nil
}
