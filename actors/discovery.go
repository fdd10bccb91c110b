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
	src := d.listen()
	defer src.stop()
	for {
		var err error
		select {
		case r := <-d.checks:
			r.answer(d.check(ctx))
		case ev := <-src.events:
			src.onEvent(d.relevant(ev))
		case werr := <-src.errs:
			d.log.Warn().Err(werr).Msg("config watcher")
		case <-timerC(src.debounce):
			err = d.onSettled(ctx, src)
		case <-src.hup:
			err = d.onHangup(ctx)
		case <-src.rehash:
			err = d.onRehash(ctx)
		case <-ctx.Done():
			return ctx.Err()
		}
		if err != nil {
			return err
		}
	}
}

// sources are what one Serve run listens to besides checks: SIGHUP, and
// with Watch the file watcher and the safety rehash. Owned by Serve.
type sources struct {
	events   <-chan fsnotify.Event
	errs     <-chan error
	hup      chan os.Signal
	rehash   <-chan time.Time
	debounce *time.Timer // armed by a relevant file event; nil when none waits
	stops    []func()
}

// listen turns on SIGHUP and, with Watch, the watcher and the rehash ticker.
func (d *Discovery) listen() *sources {
	src := &sources{hup: make(chan os.Signal, 1)}
	// SIGHUP reloads in both modes; unhandled, it would end the bridge.
	signal.Notify(src.hup, syscall.SIGHUP)
	src.stops = append(src.stops, func() { signal.Stop(src.hup) })
	if !d.cfg.Watch {
		return src
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		d.log.Error().Err(err).Msg("watching the config dir failed; reloading per call only")
	} else {
		d.watcher, d.watched = w, map[string]bool{}
		src.stops = append(src.stops, func() { _ = w.Close() })
		d.rewatch()
		src.events, src.errs = w.Events, w.Errors
	}
	t := time.NewTicker(safetyRehash)
	src.stops = append(src.stops, t.Stop)
	src.rehash = t.C
	return src
}

// stop undoes listen, last turned on first.
func (src *sources) stop() {
	src.debounce = stopTimer(src.debounce)
	for i := len(src.stops) - 1; i >= 0; i-- {
		src.stops[i]()
	}
}

// onEvent debounces relevant file events: an editor's save is several
// events, reloaded once.
func (src *sources) onEvent(relevant bool) {
	if !relevant {
		return
	}
	stopTimer(src.debounce)
	src.debounce = time.NewTimer(watchDebounce)
}

// check answers a caller's check: reload when the sources changed.
func (d *Discovery) check(ctx context.Context) error {
	if d.unchanged() {
		return nil
	}
	return d.reload(ctx)
}

// onSettled reloads once the file events have settled.
func (d *Discovery) onSettled(ctx context.Context, src *sources) error {
	src.debounce = nil
	d.rewatch()
	return d.check(ctx)
}

// onHangup reloads on SIGHUP, changed or not.
func (d *Discovery) onHangup(ctx context.Context) error {
	d.log.Info().Msg("SIGHUP: reloading the configuration")
	d.rewatch()
	return d.reload(ctx)
}

// onRehash reloads a change no file event reported.
func (d *Discovery) onRehash(ctx context.Context) error {
	d.rewatch()
	if d.unchanged() {
		return nil
	}
	d.log.Info().Msg("configuration changed without a file event; reloading")
	return d.reload(ctx)
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
