package httpd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	// gone counts the checks in a row whose load found a file missing
	// and revoked (Revoke); revoked is set while the value is the zero T.
	gone    int
	revoked bool
}

// Revoke marks a load error as "there is nothing to serve now" rather than
// "the new content is bad": a file emptied, or deleted (fs.ErrNotExist),
// which an operator does to take every value back. Check then holds the
// zero T instead of keeping the previous value. A deleted file revokes
// only once it is missing at two checks in a row: an editor's
// delete-then-write leaves it missing for one at most. The error's text is
// unchanged; the first load's error is returned as ever.
func Revoke(err error) error { return revokeError{err} }

type revokeError struct{ error }

func (e revokeError) Unwrap() error { return e.error }

func revokes(err error) bool {
	var r revokeError
	return errors.As(err, &r)
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
// again. A load error made with Revoke replaces the value with the zero T,
// logged once (warn); when the file is missing, only at the second check
// in a row that finds it so.
func (r *Reloaded[T]) Check() {
	stamp := r.fingerprint()
	// gone == 1: the file was missing at the last check; look again even
	// if nothing changed since.
	if stamp == r.stamp && r.gone != 1 {
		return
	}
	r.stamp = stamp
	v, err := r.load()
	switch {
	case err == nil:
		r.gone, r.revoked = 0, false
		r.cur.Store(v)
		r.log.Info().Str("what", r.what).Msg(r.what + " reloaded")
	case !revokes(err):
		r.gone = 0
		r.log.Error().Err(err).Str("what", r.what).Msg("reload failed; keeping the previous " + r.what)
	case errors.Is(err, fs.ErrNotExist) && r.gone == 0:
		r.gone = 1
		r.log.Debug().Err(err).Str("what", r.what).Msg(r.what + " file missing; revoked if still missing at the next check")
	default:
		if errors.Is(err, fs.ErrNotExist) {
			r.gone = 2
		} else {
			r.gone = 0
		}
		if r.revoked {
			return
		}
		r.revoked = true
		r.cur.Store(new(T))
		r.log.Warn().Err(err).Str("what", r.what).Msg(r.what + " revoked: the file is empty or missing, so none is valid until it is written again")
	}
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
