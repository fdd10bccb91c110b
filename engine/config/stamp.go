package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stamp is a cheap fingerprint of the config sources (RLD-1): the dir's own
// mtime, and the name, size, mode and mtime of each *.json in it, of
// Extra, of the enabled agent config files and of the files that approve
// project servers, without reading any file.
// Equal stamps mean Load would read the same files; take the stamp before
// calling Load, so a change that races the load shows up at the next
// check. It runs before every call, so it is built without fmt or hashing:
// the stat syscalls are its whole cost. Stamp lists each dir afresh; a
// Stamper lists a dir again only when the dir's stat changed, and skips the
// stat of a path known missing while its nearest existing ancestor is
// unchanged (stampmissing.go).
func Stamp(o Options) string { return new(Stamper).Stamp(o) }

// Stamper takes Stamps, keeping the *.json names of each dir it listed.
// Safe for concurrent use.
type Stamper struct {
	mu       sync.Mutex
	listings map[string]listing
	missing  map[string]missingPath // paths known missing (stampmissing.go)
	lastPlan *stampPlan
}

// listing is a dir's *.json names and the dir's stat when they were read.
type listing struct {
	size    int64
	mtime   time.Time
	mode    fs.FileMode
	names   []string
	trusted bool // the dir's mtime was old enough when listed (see names)
}

// racyWindow: a listing is reused only when the dir's mtime was at least
// this much older than the listing itself, so an entry added within the
// filesystem's timestamp granularity of the last change (which may leave
// the mtime unchanged) is never missed (git's "racy" index rule).
const racyWindow = 2 * time.Second

// Stamp is Stamp(o) with dir listings reused while their dir is unchanged.
func (st *Stamper) Stamp(o Options) string {
	s := stamper{st: st}
	for _, c := range st.plan(o) {
		s.field(c.tag, c.path)
		var fi fs.FileInfo
		if c.oftenMissing {
			fi = s.statOrMissing(c.path)
		} else {
			fi = s.stat(c.path)
		}
		if fi != nil && c.dir {
			s.jsonFiles(c.path, fi)
		}
	}
	return string(s.b)
}

// covered is one path a Stamp covers. Stamp and StampPaths (the Gate's
// watches) both take their paths from coveredPaths, so the Gate watches
// exactly what the check stats.
type covered struct {
	tag  string // the stamp's field: dir, extra, agent or approval
	path string
	dir  bool // its *.json entries count too, not only its own stat
	// oftenMissing: most agent and approval paths do not exist, so a
	// missing one is remembered (stampmissing.go).
	oftenMissing bool
}

// coveredPaths are the paths a Stamp of o covers, in stamp order: the
// config dir, the extra servers file, the agents' files and dirs, the
// approval files.
func coveredPaths(o Options) []covered {
	var cs []covered
	if o.Dir != "" {
		cs = append(cs, covered{tag: "dir", path: o.Dir, dir: true})
	}
	if o.Extra != "" {
		cs = append(cs, covered{tag: "extra", path: o.Extra})
	}
	for _, f := range agentFiles(o) {
		cs = append(cs, covered{tag: "agent", path: f.path, dir: f.dir, oftenMissing: true})
	}
	for _, p := range approvalFiles(o) {
		cs = append(cs, covered{tag: "approval", path: p, oftenMissing: true})
	}
	return cs
}

// names returns the *.json names in dir (whose stat is fi), by name.
func (st *Stamper) names(dir string, fi fs.FileInfo) ([]string, error) {
	st.mu.Lock()
	l, ok := st.listings[dir]
	st.mu.Unlock()
	if ok && l.trusted && l.size == fi.Size() && l.mtime.Equal(fi.ModTime()) && l.mode == fi.Mode() {
		return l.names, nil
	}
	now := time.Now()
	des, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	l = listing{size: fi.Size(), mtime: fi.ModTime(), mode: fi.Mode(), trusted: now.Sub(fi.ModTime()) > racyWindow}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".json") {
			l.names = append(l.names, de.Name())
		}
	}
	st.mu.Lock()
	if st.listings == nil {
		st.listings = map[string]listing{}
	}
	st.listings[dir] = l
	st.mu.Unlock()
	return l.names, nil
}

// stamper accumulates a Stamp. Every field is length-prefixed, so no two
// different sequences of fields give the same bytes.
type stamper struct {
	st   *Stamper
	b    []byte
	seen []seenDir // ancestors stat'ed by this stamp (stampmissing.go)
}

func (s *stamper) field(tag, v string) {
	s.b = append(s.b, tag...)
	s.b = strconv.AppendInt(append(s.b, ' '), int64(len(v)), 10)
	s.b = append(append(append(s.b, ':'), v...), '\n')
}

// stat adds what a stat of path (symlinks followed) shows; nil when the
// stat failed.
func (s *stamper) stat(path string) fs.FileInfo {
	fi, err := os.Stat(path)
	if err != nil {
		s.field("error", errText(err))
		return nil
	}
	s.addStat(fi)
	return fi
}

// addStat adds what fi shows.
func (s *stamper) addStat(fi fs.FileInfo) {
	s.b = strconv.AppendInt(s.b, fi.Size(), 10)
	s.b = strconv.AppendInt(append(s.b, ' '), fi.ModTime().UnixNano(), 10)
	s.b = strconv.AppendUint(append(s.b, ' '), uint64(fi.Mode()), 10)
	s.b = append(s.b, '\n')
}

// statOrMissing is stat for a path that is usually missing: a path known
// missing whose ancestor is unchanged adds the same bytes without its own
// stat (stampmissing.go).
func (s *stamper) statOrMissing(path string) fs.FileInfo {
	if text, ok := s.stillMissing(path); ok {
		s.field("error", text)
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		s.field("error", errText(err))
		s.rememberMissing(path, err)
		return nil
	}
	s.forgetMissing(path)
	s.addStat(fi)
	return fi
}

// jsonFiles adds the name and stat of each *.json in dir (whose stat is
// fi), by name.
func (s *stamper) jsonFiles(dir string, fi fs.FileInfo) {
	names, err := s.st.names(dir, fi)
	if err != nil {
		s.field("list error", errText(err))
		return
	}
	for _, name := range names {
		s.field("file", name)
		s.stat(filepath.Join(dir, name))
	}
}
