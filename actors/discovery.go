package actors

import (
	"context"

	"github.com/rs/zerolog"
)

// DiscoveryConfig is what the discovery actor reads configs with; the engine
// implements the functions.
type DiscoveryConfig struct {
	// Stamp is a cheap fingerprint of the config sources (stat only).
	Stamp func() string
	// Load reads every config source and returns the servers in config order.
	Load func() []ServerSpec
	Log  zerolog.Logger
}

// Discovery is the discovery actor: it loads the configuration at start and,
// before each call, confirms it is current (RLD-1); changes are applied to
// the servers manager one reload at a time (RLD-3).
type Discovery struct {
	cfg     DiscoveryConfig
	servers *Servers
	checks  chan chan error
	stamp   string // owned by Serve
}

// NewDiscovery returns the actor.
func NewDiscovery(cfg DiscoveryConfig, servers *Servers) *Discovery {
	return &Discovery{cfg: cfg, servers: servers, checks: make(chan chan error)}
}

func (d *Discovery) String() string { return "discovery" }

// Check makes sure the configuration the next call sees is current.
func (d *Discovery) Check(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case d.checks <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Serve loads the configuration, then answers checks until ctx ends.
func (d *Discovery) Serve(ctx context.Context) error {
	if err := d.reload(ctx); err != nil {
		return err
	}
	for {
		select {
		case reply := <-d.checks:
			var err error
			if d.cfg.Stamp() != d.stamp {
				err = d.reload(ctx)
			}
			reply <- err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (d *Discovery) reload(ctx context.Context) error {
	stamp := d.cfg.Stamp()
	specs := d.cfg.Load()
	if _, err := d.servers.Apply(ctx, specs); err != nil {
		return err
	}
	d.stamp = stamp
	return nil
}
