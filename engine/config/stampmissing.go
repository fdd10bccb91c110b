package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Most config sources do not exist (a dozen agent and project files, of
// which a user has one or two), and each cost a stat before every call.
// A Stamper remembers, for a path that was missing, its nearest existing
// ancestor directory and that directory's identity and times: while the
// ancestor shows the same inode, mtime, ctime, size and mode, no entry was
// created, removed or renamed in it, so the path is still missing and its
// stat need not be repeated. Paths that share an ancestor ($HOME, the
// working directory) then cost one stat between them. Only an ancestor
// whose mtime was older than racyWindow when remembered is trusted, as for
// listings: a change in the same timestamp tick may leave it unchanged. Where the platform shows no ctime or inode (dirStatOf
// reports !ok), every path is stat'ed as before.

// dirStat identifies a directory's state as a stat shows it.
type dirStat struct {
	dev, ino     uint64
	size         int64
	mode         fs.FileMode
	mtime, ctime int64 // Unix nanoseconds
}

// missingPath is a path that was missing, with its nearest existing
// ancestor dir and that dir's state then.
type missingPath struct {
	errText  string // the stat's error text, as stat adds it to the stamp
	ancestor string
	state    dirStat
}

// stampPlan is the paths a Stamp of opts covers, computed once per Options
// (the stamp runs before every call; the joins cost more than the stats
// they name when most paths are cached).
type stampPlan struct {
	opts  Options
	paths []covered
}

// samePlanOptions reports whether a and b name the same paths.
func samePlanOptions(a, b Options) bool {
	return a.Dir == b.Dir && a.Extra == b.Extra && a.Home == b.Home && a.Cwd == b.Cwd &&
		a.Project == b.Project && a.ProjectServers == b.ProjectServers && slices.Equal(a.Sources, b.Sources) &&
		(a.Sources == nil) == (b.Sources == nil)
}

// plan returns the paths a Stamp of o covers, reusing the last plan while
// o names the same paths.
func (st *Stamper) plan(o Options) []covered {
	st.mu.Lock()
	p := st.lastPlan
	st.mu.Unlock()
	if p != nil && samePlanOptions(p.opts, o) {
		return p.paths
	}
	p = &stampPlan{opts: o, paths: coveredPaths(o)}
	p.opts.Sources = slices.Clone(o.Sources)
	st.mu.Lock()
	st.lastPlan = p
	st.mu.Unlock()
	return p.paths
}

// stillMissing reports whether path is known missing: it was missing when
// remembered and its ancestor's state is unchanged (stated once per
// stamp in seen). It returns the stat's error text for the stamp.
func (s *stamper) stillMissing(path string) (string, bool) {
	s.st.mu.Lock()
	m, ok := s.st.missing[path]
	s.st.mu.Unlock()
	if !ok {
		return "", false
	}
	cur, ok := s.ancestorState(m.ancestor)
	if !ok || cur != m.state {
		return "", false
	}
	return m.errText, true
}

// ancestorState stats dir once per stamp; ok is false when it cannot be
// stat'ed or its state cannot be trusted (see dirStatOf).
func (s *stamper) ancestorState(dir string) (dirStat, bool) {
	for _, a := range s.seen {
		if a.dir == dir {
			return a.state, a.ok
		}
	}
	var ds dirStat
	fi, err := os.Stat(dir)
	ok := err == nil && fi.IsDir()
	if ok {
		ds, ok = dirStatOf(fi)
	}
	s.seen = append(s.seen, seenDir{dir, ds, ok})
	return ds, ok
}

// seenDir is an ancestor dir stat'ed during one stamp.
type seenDir struct {
	dir   string
	state dirStat
	ok    bool
}

// rememberMissing records that path is missing (err, a not-exist error)
// when its nearest existing ancestor is trusted: its mtime is older than
// racyWindow, so an entry created now changes it (and an mtime set back by
// hand changes the ctime, which is compared too). The
// ancestor's state is taken first and the path's first missing component
// stat'ed again after it, so an entry created between the two shows either
// in that stat or as a change of the ancestor at the next stamp.
func (s *stamper) rememberMissing(path string, err error) {
	if !errors.Is(err, fs.ErrNotExist) {
		return
	}
	child, dir := path, filepath.Dir(path)
	for {
		fi, serr := os.Stat(dir)
		if serr == nil {
			if !fi.IsDir() {
				return
			}
			ds, ok := dirStatOf(fi)
			now := time.Now().UnixNano()
			if !ok || now-ds.mtime <= int64(racyWindow) {
				return
			}
			if _, cerr := os.Lstat(child); !errors.Is(cerr, fs.ErrNotExist) {
				return // created meanwhile (or unreadable): stat the path next time
			}
			s.st.mu.Lock()
			if s.st.missing == nil {
				s.st.missing = map[string]missingPath{}
			}
			s.st.missing[path] = missingPath{errText: errText(err), ancestor: dir, state: ds}
			s.st.mu.Unlock()
			return
		}
		if !errors.Is(serr, fs.ErrNotExist) {
			return
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		child, dir = dir, parent
	}
}

// forgetMissing drops path's record (it exists now, or its stat failed
// otherwise).
func (s *stamper) forgetMissing(path string) {
	s.st.mu.Lock()
	delete(s.st.missing, path)
	s.st.mu.Unlock()
}
