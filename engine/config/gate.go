package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// A Gate lets the check before every call (RLD-1) skip its stats while
// nothing it covers changed. Where the kernel offers file events (inotify
// on Linux) the Gate watches every directory a Stamp looks into, and each
// ancestor of those up to the root, for the entries the Stamp names in it;
// the events are queued by the very syscall that made the change, before
// that syscall returns, so a non-blocking read of the queue before a call
// sees every change made before that call began. A Stamp is taken afresh
// when:
//   - an event arrived for a covered name, or one on a watched directory
//     itself (its permissions, its removal), or the queue overflowed;
//   - the last fresh Stamp is older than gateMaxAge: a change the kernel
//     does not report (made on another host to a network filesystem the
//     check does not know) is then still seen within that time;
//   - for good, once any directory involved was on a filesystem not known
//     to report every change (gateLocalFS), or a watch could not be added:
//     every Stamp is then fresh, as without a Gate.
//
// Symlinks are followed: the directories of a path's resolved form are
// watched too. Safe for concurrent use; the zero Gate is ready, opens its
// queue on first use and holds it until ctx of Serve ends.
type Gate struct {
	mu     sync.Mutex
	q      *eventQueue // nil until first use, or when the platform has none
	closed bool
	armed  bool      // the watches cover the last fresh stamp's paths and no event came since
	stamp  string    // the last fresh stamp
	at     time.Time // when it was taken
}

// gateMaxAge bounds how long a stamp is reused without a fresh one.
const gateMaxAge = time.Second

// GatePaths are the paths a Stamp covers: Files are stat'ed (their
// directory entry matters), Dirs are listed (any entry in them matters).
type GatePaths struct {
	Files, Dirs []string
}

// StampPaths are the paths Stamp(o) covers, from the same list.
func StampPaths(o Options) GatePaths {
	var p GatePaths
	for _, c := range coveredPaths(o) {
		if c.dir {
			p.Dirs = append(p.Dirs, c.path)
		} else {
			p.Files = append(p.Files, c.path)
		}
	}
	return p
}

// Serve holds the Gate's event queue until ctx ends, then closes it; later
// Stamps are all fresh.
func (g *Gate) Serve(ctx context.Context) error {
	<-ctx.Done()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.armed = true, false
	if g.q != nil {
		g.q.close()
		g.q = nil
	}
	return ctx.Err()
}

func (g *Gate) String() string { return "config gate" }

// Stamp returns fresh() or, while the Gate is armed and no covered change
// was reported, the stamp fresh() returned last. fresh must cover no more
// than paths.
func (g *Gate) Stamp(paths GatePaths, fresh func() string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fresh()
	}
	if g.q == nil {
		q, err := openEventQueue()
		if err != nil {
			g.closed = true // no events on this platform or no queue left: every stamp is fresh
			return fresh()
		}
		g.q = q
	}
	// quiet reads the whole queue: what it held is covered by a fresh
	// stamp below if one is taken.
	if quiet := g.q.quiet(); g.armed && quiet && time.Since(g.at) < gateMaxAge {
		return g.stamp
	}
	// Watch first, then stamp: a change racing the stamp is reported at
	// the next check.
	g.armed = false
	if !g.q.watch(watchPlan(paths)) {
		// Arming again before every call would cost more than the stats
		// it saves: this Gate stays open.
		g.q.close()
		g.q, g.closed = nil, true
		return fresh()
	}
	g.armed, g.at = true, time.Now()
	g.stamp = fresh()
	return g.stamp
}

// watchDir is one directory to watch: the names in it that matter, or
// every name (all); or, with file, one existing covered file, watched by
// its inode so that a change through another of its names (a hard link)
// is seen too.
type watchDir struct {
	names map[string]bool
	all   bool
	file  bool
}

// watchPlan maps each directory to watch to what matters in it: for every
// path, each existing ancestor (the next component's name in it), for a
// listed dir the dir itself and each *.json in it as a covered file, and
// the same for the path's resolved form when a symlink is on the way; and
// each existing file itself.
func watchPlan(paths GatePaths) map[string]*watchDir {
	plan := map[string]*watchDir{}
	add := func(dir, name string, all bool) {
		w := plan[dir]
		if w == nil {
			w = &watchDir{names: map[string]bool{}}
			plan[dir] = w
		}
		w.all = w.all || all
		if name != "" {
			w.names[name] = true
		}
	}
	chain := func(p string) string { // adds p's ancestors; returns its nearest existing prefix
		p = filepath.Clean(p)
		existing := ""
		for dir, name := filepath.Dir(p), filepath.Base(p); ; dir, name = filepath.Dir(dir), filepath.Base(dir) {
			if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
				add(dir, name, false)
				if existing == "" {
					existing = dir
					if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
						existing = filepath.Join(dir, name)
					}
				}
			}
			if dir == filepath.Dir(dir) {
				return existing
			}
		}
	}
	var walk func(p string, listed bool)
	walk = func(p string, listed bool) {
		if !filepath.IsAbs(p) {
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
		}
		existing := chain(p)
		if fi, err := os.Stat(p); err == nil {
			switch {
			case !fi.IsDir():
				plan[p] = &watchDir{all: true, file: true}
			case listed:
				add(p, "", true)
				// Its *.json files are stat'ed, symlinks followed: each is
				// covered as a file of its own.
				des, _ := os.ReadDir(p)
				for _, de := range des {
					if strings.HasSuffix(de.Name(), ".json") {
						walk(filepath.Join(p, de.Name()), false)
					}
				}
			}
		}
		if existing == "" {
			return
		}
		if real, err := filepath.EvalSymlinks(existing); err == nil && real != existing {
			rest := strings.TrimPrefix(p, existing)
			chain(filepath.Join(real, rest))
		}
	}
	for _, f := range paths.Files {
		walk(f, false)
	}
	for _, d := range paths.Dirs {
		walk(d, true)
	}
	return plan
}
