package engine

// leader.go: bridge serve --leader-elect. Replicas of one deployment stand
// by until they hold the leader Lease (engine/kube); only the leader runs
// the actors (the warm pool, the upstream servers, the sweep), answers
// /mcp and is Ready. A leader that misses its renewals fences itself and
// exits; one that stops gracefully releases the Lease after its drain.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/httpd"
	"github.com/bridge-mcp/bridge/engine/kube"
)

// ErrLeaderElect is the error of --leader-elect without the
// kubernetes runtime.
var ErrLeaderElect = errors.New("serve: --leader-elect needs MCP_BRIDGE_RUNTIME=kubernetes: " +
	"the replicas share a Lease in the sandboxes' namespace and a state volume")

// errLostLease is ServeHTTP's error after the fence: the process exits
// non-zero and its restart stands by.
var errLostLease = errors.New("serve: lost the leader lease: exiting, to restart as the standby")

// leadership is one replica's election, as ServeHTTP uses it. A nil
// *leadership is a bridge without election: it always serves.
type leadership struct {
	*kube.Leadership
	standby atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// startLeadership joins the election on a goroutine of its own, stopped
// and waited for by stop.
func (e *Engine) startLeadership(metrics *httpd.Metrics, log zerolog.Logger) (*leadership, error) {
	if e.Kube == nil {
		return nil, ErrLeaderElect
	}
	p, err := e.Kube.NewLeadership(kube.ReplicaIdentity(), kube.DefaultElectionTimes)
	if err != nil {
		return nil, fmt.Errorf("serve: --leader-elect: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &leadership{Leadership: p, cancel: cancel, done: make(chan struct{})}
	l.standby.Store(true)
	metrics.Leader(false)
	go func() {
		defer close(l.done)
		if err := p.Run(ctx); err != nil {
			log.Error().Err(err).Msg("leader election")
		}
	}()
	return l, nil
}

// isStandby reports whether the replica stands by (/readyz, /mcp).
func (l *leadership) isStandby() bool { return l != nil && l.standby.Load() }

// stop ends the election, releasing the Lease if this replica holds it,
// and waits for it.
func (l *leadership) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

// awaitLead stands by until this replica leads (true), or ctx ends or the
// server fails first (false; the server's error is put back on served).
func (l *leadership) awaitLead(ctx context.Context, served chan error, log zerolog.Logger) bool {
	if l == nil {
		return true
	}
	log.Info().Str("identity", l.Identity()).Str("lease", kube.LeaderLease).Msg("standing by: /readyz answers \"standby\" until this replica holds the leader lease")
	select {
	case <-ctx.Done():
		return false
	case err := <-served:
		served <- err
		return false
	case <-l.Leading():
		log.Info().Str("identity", l.Identity()).Msg("leading: starting the actors")
		return true
	}
}

// fence stops a leader that lost the Lease from acting as one, before any
// other replica can take it: /mcp refuses, snapshots are no longer
// written, and bridge_leader drops to 0.
func (e *Engine) fence(d *httpd.Drain, metrics *httpd.Metrics) {
	d.Start()
	if e.snaps != nil {
		e.snaps.Fence()
	}
	metrics.Leader(false)
	e.Log.Error().Str("lease", kube.LeaderLease).Dur("renewDeadline", kube.DefaultElectionTimes.RenewDeadline).
		Msg("lost the leader lease (no renewal within the deadline): stopped serving and writing snapshots; exiting so this replica restarts as the standby")
}
