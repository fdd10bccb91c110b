package httpd

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Reloaded holds the value loaded from files and reloads it when they
// change. Changes are found by polling each file's identity (inode, size,
// modification time) rather than with inotify: a Kubernetes secret or
// cert-manager update replaces a symlink, which a poll sees and a watch on
// the old inode does not.
type Reloaded[T any] struct {
	paths []string
	load  func() (*T, error)
	log   zerolog.Logger
	what  string
	cur   atomic.Pointer[T]
	stamp string
}

// NewReloaded loads the value once; the error is the first load's.
func NewReloaded[T any](what string, paths []string, load func() (*T, error), log zerolog.Logger) (*Reloaded[T], error) {
	r := &Reloaded[T]{paths: paths, load: load, log: log, what: what}
	r.stamp = r.fingerprint()
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(v)
	return r, nil
}

// Get is the current value; never nil.
func (r *Reloaded[T]) Get() *T { return r.cur.Load() }

// Run polls every interval until ctx ends.
func (r *Reloaded[T]) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Check()
		}
	}
}

// Check reloads when a file changed since the last check. An invalid new
// content keeps the old value and is logged once, until the files change
// again.
func (r *Reloaded[T]) Check() {
	stamp := r.fingerprint()
	if stamp == r.stamp {
		return
	}
	r.stamp = stamp
	v, err := r.load()
	if err != nil {
		r.log.Error().Err(err).Str("what", r.what).Msg("reload failed; keeping the previous " + r.what)
		return
	}
	r.cur.Store(v)
	r.log.Info().Str("what", r.what).Msg(r.what + " reloaded")
}

func (r *Reloaded[T]) fingerprint() string {
	s := ""
	for _, p := range r.paths {
		st, err := os.Stat(p)
		if err != nil {
			s += "|missing"
			continue
		}
		var ino uint64
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
		s += fmt.Sprintf("|%d:%d:%d", ino, st.Size(), st.ModTime().UnixNano())
	}
	return s
}
