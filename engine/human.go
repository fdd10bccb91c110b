package engine

import (
	"context"

	"github.com/bridge-mcp/bridge/actors"
)

// Human is the person behind a call, who answers its approvals and the
// questions its servers relay; HumanCaps says what they can answer. cmd
// implements one for bridge exec's terminal. They are the actors' types,
// named here so that cmd keeps to the layering cmd → engine → actors.
type (
	Human     = actors.Human
	HumanCaps = actors.HumanCaps
)

// WithHuman attaches h to the calls run under ctx (Engine.Exec).
func WithHuman(ctx context.Context, h Human) context.Context { return actors.WithHuman(ctx, h) }
