package actors

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// Reload timing (RLD-2).
const (
	watchDebounce = 250 * time.Millisecond
	safetyRehash  = 30 * time.Second
)

// DiscoveryConfig is what the discovery actor reads configs with; the engine
// implements the functions.
type DiscoveryConfig struct {
	// Stamp is a cheap fingerprint of the config sources (stat only).
	Stamp func() string
	// Load reads every config source and returns the servers in config
	// order and the tool-call policy (nil for none).
	Load func() ([]ServerSpec, *Policy)
	// Watch turns on the fsnotify watcher and SIGHUP (bridge run --watch).
	Watch bool
	// Dir is the config directory; Extra is $MCP_SERVERS_CONFIG ("" when
	// unset); Policy is the policy file, watched like a config file.
	Dir, Extra, Policy string
	Log                zerolog.Logger

	// Paths are agent config files and dirs (~/.claude.json, ...), watched
	// through their nearest existing directories.
	Paths []string
}

// Discovery is the discovery actor: it loads the configuration at start and,
// before each call, confirms it is current (RLD-1). With Watch it also
// reloads on file changes and SIGHUP (RLD-2). Changes are applied to the
// servers manager one reload at a time (RLD-3).
type Discovery struct {
	cfg     DiscoveryConfig
	servers *Servers
	checks  chan request[struct{}, error]
	log     zerolog.Logger
	// loaded is the stamp of the configuration applied last: written by
	// Serve after each reload, read by Check on the callers' goroutines and
	// by Serve (unchanged).
	loaded atomic.Pointer[string]

	// Owned by the Serve goroutine.
	watcher *fsnotify.Watcher
	watched map[string]bool
}

// NewDiscovery returns the actor.
func NewDiscovery(cfg DiscoveryConfig, servers *Servers) *Discovery {
	return &Discovery{cfg: cfg, servers: servers, checks: make(chan request[struct{}, error]),
		log: cfg.Log.With().Str("actor", "discovery").Logger()}
}

func (d *Discovery) String() string { return "discovery" }

// Check makes sure the configuration the next call sees is current. The
// caller takes the stamp itself (stats only): unchanged sources need no
// round trip to the actor.
func (d *Discovery) Check(ctx context.Context) error {
	if d.unchanged() {
		return nil
	}
	loadErr, err := ask(ctx, d.checks, nil, struct{}{})
	if err != nil {
		return err
	}
	return loadErr
}

// Serve loads the configuration, then answers checks (and, with Watch,
// file events and SIGHUP) until ctx ends.
func (d *Discovery) Serve(ctx context.Context) error {
	if err := d.reload(ctx); err != nil {
		return err
	}
	var (
		events   <-chan fsnotify.Event
		errs     <-chan error
		hup      chan os.Signal
		rehash   <-chan time.Time
		debounce *time.Timer
		fire     <-chan time.Time
	)
	// SIGHUP reloads in both modes; unhandled, it would end the bridge.
	hup = make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if d.cfg.Watch {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			d.log.Error().Err(err).Msg("watching the config dir failed; reloading per call only")
		} else {
			d.watcher, d.watched = w, map[string]bool{}
			defer w.Close()
			d.rewatch()
			events, errs = w.Events, w.Errors
		}
		t := time.NewTicker(safetyRehash)
		defer t.Stop()
		rehash = t.C
	}
	defer func() {
		if debounce != nil {
			debounce.Stop()
		}
	}()
	for {
		select {
		case r := <-d.checks:
			var err error
			if !d.unchanged() {
				err = d.reload(ctx)
			}
			r.answer(err)
		case ev := <-events:
			if !d.relevant(ev) {
				continue
			}
			// Debounce: an editor's save is several events; reload once.
			if debounce == nil {
				debounce = time.NewTimer(watchDebounce)
			} else {
				debounce.Reset(watchDebounce)
			}
			fire = debounce.C
		case err := <-errs:
			d.log.Warn().Err(err).Msg("config watcher")
		case <-fire:
			fire = nil
			d.rewatch()
			if !d.unchanged() {
				if err := d.reload(ctx); err != nil {
					return err
				}
			}
		case <-hup:
			d.log.Info().Msg("SIGHUP: reloading the configuration")
			d.rewatch()
			if err := d.reload(ctx); err != nil {
				return err
			}
		case <-rehash:
			d.rewatch()
			if !d.unchanged() {
				d.log.Info().Msg("configuration changed without a file event; reloading")
				if err := d.reload(ctx); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// relevant reports whether an event can change the configuration: .json
// names (or the extra file) only, chmod-only events ignored. Events on a
// watched parent that create the config dir itself count too.
func (d *Discovery) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := filepath.Clean(ev.Name)
	switch {
	case filepath.Ext(name) == ".json":
		return true
	case d.cfg.Extra != "" && name == filepath.Clean(d.cfg.Extra):
		return true
	case d.cfg.Policy != "" && name == filepath.Clean(d.cfg.Policy):
		return true
	case name == filepath.Clean(d.cfg.Dir):
		return true
	}
	// An agent file or dir, or a directory on the way to one (~/.cursor
	// created): the debounced rewatch then watches the new directory.
	for _, p := range d.cfg.Paths {
		if p = filepath.Clean(p); name == p || strings.HasPrefix(p, name+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// rewatch watches the config dir, or its nearest existing ancestor while it
// is missing, and the parent of the extra file: directories only, never the
// files, so atomic saves (write + rename) are seen.
func (d *Discovery) rewatch() {
	if d.watcher == nil {
		return
	}
	want := map[string]bool{}
	want[existingAncestor(d.cfg.Dir)] = true
	if d.cfg.Extra != "" {
		want[existingAncestor(filepath.Dir(d.cfg.Extra))] = true
	}
	for _, p := range d.cfg.Paths {
		want[existingAncestor(p)] = true // the dir itself for a dir source
		want[existingAncestor(filepath.Dir(p))] = true
	}
	for p := range d.watched {
		if !want[p] {
			_ = d.watcher.Remove(p)
			delete(d.watched, p)
		}
	}
	for p := range want {
		if p == "" || d.watched[p] {
			continue
		}
		if err := d.watcher.Add(p); err != nil {
			d.log.Warn().Err(err).Str("dir", p).Msg("cannot watch")
			continue
		}
		d.watched[p] = true
	}
}

// existingAncestor returns dir if it exists, else its nearest existing
// ancestor.
func existingAncestor(dir string) string {
	for dir = filepath.Clean(dir); ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}

// unchanged reports whether the config sources still show the stamp of the
// configuration applied last (false before the first load).
func (d *Discovery) unchanged() bool {
	p := d.loaded.Load()
	return p != nil && d.cfg.Stamp() == *p
}

func (d *Discovery) reload(ctx context.Context) error {
	stamp := d.cfg.Stamp()
	specs, policy := d.cfg.Load()
	if _, err := d.servers.Apply(ctx, specs, policy); err != nil {
		return err
	}
	d.loaded.Store(&stamp)
	return nil
}
