package actors

// durable.go: sessions that survive. A sandbox snapshots its session and
// uploads it (snapshot_begin, snapshot_write, snapshot_end); a new sandbox
// of the same (principal, session) loads it in its first cell
// (snapshot_read). The host never reads what a snapshot holds: unpickling
// is code execution, so it happens in the sandbox only. These requests
// are the sandbox's own, bound to the session that holds it (never to a
// name the sandbox sends, except fork_session's new name under the same
// principal), and are served with or without an active call: an upload
// goes on after its cell's result.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
)

// SnapshotStore is the host's store of sessions' snapshots, by (principal,
// session): engine/snapshot behind the engine's adapter. Its errors are
// one-line messages for the user (an over-cap write names its variable).
type SnapshotStore interface {
	Create(principal, session string) (SnapshotWriter, error)
	// Open returns the verified snapshot, or nil, nil when there is none; an
	// edited or truncated one is refused (and dropped) with an error.
	Open(principal, session string) (SnapshotReader, error)
	Stat(principal, session string) (SnapshotMeta, bool)
	SetLastCall(principal, session string, n int64) error
	Delete(principal, session string) error
}

// SnapshotMeta describes a stored snapshot.
type SnapshotMeta struct {
	Call     int64 // the call whose state it holds
	LastCall int64 // the last call the session started
	Cell     int   // the last cell number it holds
	Taken    time.Time
	Bytes    int64
	Names    int
	Files    int
	Left     []string
	Image    string
}

// SnapshotWriter streams one upload to a temporary file; Commit makes it
// the session's snapshot, Abort drops it.
type SnapshotWriter interface {
	Write(p []byte) (int, error)
	Size() int64
	Commit(m SnapshotMeta) (SnapshotMeta, error)
	Abort()
}

// SnapshotReader reads a verified snapshot.
type SnapshotReader interface {
	io.ReaderAt
	Size() int64
	Meta() SnapshotMeta
	Close() error
}

// Durability modes (MCP_BRIDGE_SESSION_DURABILITY).
const (
	DurabilityCell = "cell"
	DurabilityExit = "exit"
	DurabilityOff  = "off"
)

// Bounds on what a sandbox's snapshot requests may carry.
const (
	maxSnapChunk = 4 << 20
	maxLeftNames = 64
	maxLeftBytes = 200
	// exitSnapshotBound is how long a sandbox closed politely may take to
	// snapshot its session (durability on exit).
	exitSnapshotBound = 30 * time.Second
)

// snapChunk is the data one data frame carries at most: within the frame
// cap, with room for its header.
func snapChunk(maxFrame int) int {
	return max(4096, min(maxSnapChunk, maxFrame-4096))
}

// snapOwner is the session a sandbox serves, set before its first exec.
type snapOwner struct {
	principal, name string
	// exists reports whether a session of this bridge is live under a key.
	exists func(key string) bool
}

// durable is a sandbox's snapshot state.
type durable struct {
	owner atomic.Pointer[snapOwner]
	mu    sync.Mutex
	up    *snapUpload    // the upload in progress; one at a time
	rd    SnapshotReader // the snapshot the restoring call offers
}

type snapUpload struct {
	id, target string
	w          SnapshotWriter
	// err is why the upload failed while its data frames came (over the
	// cap, out of order); its next request or snapshot_end returns it.
	// Guarded by durable.mu.
	err error
}

// durableMethods are the sandbox's snapshot requests, answered by the
// sandbox itself.
var durableMethods = map[string]func(s *sandbox, params json.RawMessage) (any, error){
	protocol.MethodSnapshotBegin: (*sandbox).snapBegin,
	protocol.MethodSnapshotWrite: (*sandbox).snapWrite,
	protocol.MethodSnapshotEnd:   (*sandbox).snapEnd,
	protocol.MethodSnapshotAbort: (*sandbox).snapAbort,
	protocol.MethodSnapshotRead:  (*sandbox).snapRead,
}

func isDurableMethod(method string) bool {
	_, ok := durableMethods[method]
	return ok
}

var errNoUpload = LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "no such snapshot upload (another one replaced it)")

// snapStore is the store and the owner, or a link error saying why there
// is none.
func (s *sandbox) snapStore() (SnapshotStore, *snapOwner, error) {
	o := s.snap.owner.Load()
	if s.cfg.Snapshots == nil || o == nil {
		return nil, nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, "snapshots are off in this bridge (MCP_BRIDGE_SESSION_DURABILITY=off)")
	}
	return s.cfg.Snapshots, o, nil
}

func (s *sandbox) snapBegin(params json.RawMessage) (any, error) {
	st, o, err := s.snapStore()
	if err != nil {
		return nil, err
	}
	var p protocol.SnapshotBeginParams
	if err := decodeParams(protocol.MethodSnapshotBegin, params, &p); err != nil {
		return nil, err
	}
	target := o.name
	if p.Session != nil {
		if err := s.checkFork(st, o, *p.Session); err != nil {
			return nil, err
		}
		target = *p.Session
	}
	w, err := st.Create(o.principal, target)
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, "snapshot: "+err.Error())
	}
	up := &snapUpload{id: randomID(), target: target, w: w}
	s.snap.mu.Lock()
	old := s.snap.up
	s.snap.up = up
	s.snap.mu.Unlock()
	if old != nil {
		old.w.Abort()
	}
	if p.Session == nil {
		// The call this snapshot holds was started: a restore after a
		// SIGKILL that loses this upload says how far behind it is.
		if err := st.SetLastCall(o.principal, o.name, p.Call); err != nil {
			s.log.Debug().Err(err).Msg("snapshot: last call not recorded")
		}
	}
	return protocol.SnapshotBeginResult{Upload: up.id, Chunk: snapChunk(s.cfg.MaxFrame)}, nil
}

// checkFork refuses a fork into this session, into a session that exists
// (live here, or with a snapshot of its own) or into a bad name.
func (s *sandbox) checkFork(st SnapshotStore, o *snapOwner, name string) error {
	bad := func(msg string) error {
		return LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, msg)
	}
	switch {
	case !sessionRe.MatchString(name):
		return bad("fork_session: a session name is 1-64 characters from A-Z a-z 0-9 _ . -")
	case name == o.name:
		return bad("fork_session: name another session than this one")
	case o.exists != nil && o.exists(SessionKey(o.principal, name)):
		return bad(fmt.Sprintf("fork_session: session '%s' is live; fork into a new name, or run runtime.reset() in it first", name))
	}
	if _, ok := st.Stat(o.principal, name); ok {
		return bad(fmt.Sprintf("fork_session: session '%s' has a snapshot of its own; fork into a new name, or run runtime.reset() in it first", name))
	}
	return nil
}

// upload returns the upload named id, or an error.
func (s *sandbox) upload(id string) (*snapUpload, error) {
	s.snap.mu.Lock()
	defer s.snap.mu.Unlock()
	if s.snap.up == nil || s.snap.up.id != id {
		return nil, errNoUpload
	}
	return s.snap.up, nil
}

// dropUpload forgets up (if it is still the current one) and aborts it.
func (s *sandbox) dropUpload(up *snapUpload) {
	s.snap.mu.Lock()
	if s.snap.up == up {
		s.snap.up = nil
	}
	s.snap.mu.Unlock()
	up.w.Abort()
}

func (s *sandbox) snapWrite(params json.RawMessage) (any, error) {
	var p protocol.SnapshotWriteParams
	if err := decodeParams(protocol.MethodSnapshotWrite, params, &p); err != nil {
		return nil, err
	}
	up, err := s.upload(p.Upload)
	if err != nil {
		return nil, err
	}
	if err := s.writeChunk(up, p.Offset, nil); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// writeChunk appends data at offset to up (no data only checks the upload:
// snapshot_write, a sync after data frames). A failure drops the upload, whose
// later requests return the same error.
func (s *sandbox) writeChunk(up *snapUpload, offset int64, data []byte) error {
	s.snap.mu.Lock()
	defer s.snap.mu.Unlock()
	if up.err != nil {
		return up.err
	}
	switch {
	case len(data) > snapChunk(s.cfg.MaxFrame) || offset != up.w.Size():
		up.err = LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments,
			"its data came out of order or over the chunk size (something else wrote on the link), and the upload was dropped")
	case len(data) > 0:
		if _, err := up.w.Write(data); err != nil {
			o := s.snap.owner.Load()
			up.err = LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments,
				fmt.Sprintf("session '%s' is no longer durable: %v; keep less in it (del what you no longer need) or raise the cap", o.name, err))
		}
	}
	if up.err != nil {
		up.w.Abort()
	}
	return up.err
}

// onData takes one data frame from the link's reader: head "#W <upload>
// <offset>" and its bytes, a chunk of the upload in progress. Any other
// frame, or one for an upload that is not current, is dropped and counted.
func (s *sandbox) onData(head, data []byte) {
	rest, ok := bytes.CutPrefix(head, []byte("#W "))
	fields := bytes.SplitN(rest, []byte(" "), 2)
	if !ok || len(fields) != 2 {
		s.dropped("invalid data line", "")
		return
	}
	offset, err := strconv.ParseInt(string(fields[1]), 10, 64)
	up, uerr := s.upload(string(fields[0]))
	if err != nil || uerr != nil {
		s.dropped("invalid data line", "")
		return
	}
	_ = s.writeChunk(up, offset, data) // the upload's next request says how it failed
}

func (s *sandbox) snapEnd(params json.RawMessage) (any, error) {
	var p protocol.SnapshotEndParams
	if err := decodeParams(protocol.MethodSnapshotEnd, params, &p); err != nil {
		return nil, err
	}
	up, err := s.upload(p.Upload)
	if err != nil {
		return nil, err
	}
	s.snap.mu.Lock()
	s.snap.up = nil
	failed := up.err
	s.snap.mu.Unlock()
	if failed != nil {
		return nil, failed
	}
	taken := time.Now()
	if p.Taken > 0 && p.Taken < 1e11 {
		taken = time.Unix(0, int64(p.Taken*1e9))
	}
	m, err := up.w.Commit(SnapshotMeta{
		Call: p.Call, Cell: p.Cell, Taken: taken, Names: p.Names, Files: p.Files, Left: cleanLeft(p.Left),
		Image: s.cfg.Image + " python " + printable.Log(clip(p.Python, 32)),
	})
	if err != nil {
		up.w.Abort()
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, "snapshot: "+err.Error())
	}
	o := s.snap.owner.Load()
	s.log.Debug().Int64("call", p.Call).Int64("bytes", m.Bytes).Bool("fork", up.target != o.name).Msg("snapshot stored")
	return protocol.SnapshotEndResult{Bytes: m.Bytes}, nil
}

// cleanLeft bounds the names a sandbox says it left out: they go into a
// stored file and into notes.
func cleanLeft(in []string) []string {
	var out []string
	for _, l := range in {
		if len(out) == maxLeftNames {
			break
		}
		out = append(out, printable.Log(clip(l, maxLeftBytes)))
	}
	return out
}

func (s *sandbox) snapAbort(params json.RawMessage) (any, error) {
	var p protocol.UploadParams
	if err := decodeParams(protocol.MethodSnapshotAbort, params, &p); err != nil {
		return nil, err
	}
	if up, err := s.upload(p.Upload); err == nil {
		s.dropUpload(up)
	}
	return struct{}{}, nil
}

func (s *sandbox) snapRead(params json.RawMessage) (any, error) {
	var p protocol.SnapshotReadParams
	if err := decodeParams(protocol.MethodSnapshotRead, params, &p); err != nil {
		return nil, err
	}
	s.snap.mu.Lock()
	rd := s.snap.rd
	s.snap.mu.Unlock()
	if rd == nil {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, "no snapshot is offered to this sandbox")
	}
	if p.Offset < 0 || p.Length <= 0 || p.Length > snapChunk(s.cfg.MaxFrame) {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "snapshot_read: bad offset or length")
	}
	buf := make([]byte, min(int64(p.Length), max(0, rd.Size()-p.Offset)))
	n, err := rd.ReadAt(buf, p.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, "snapshot: "+err.Error())
	}
	if s.stream == nil { // a sandbox built by hand (unit tests)
		return protocol.SnapshotReadResult{Data: buf[:n], Bytes: n}, nil
	}
	// The bytes go first as a data frame "#R <offset> <n>" and n raw
	// bytes, which the sandbox keeps until this reply names them: no JSON
	// parser reads them, and no base64 grows them.
	frame := protocol.DataHeader(strconv.AppendInt([]byte("#R "), p.Offset, 10), n)
	frame = append(frame, buf[:n]...)
	if err := s.stream.WriteLine(frame, linkWriteBound); err != nil {
		return nil, LinkError(protocol.CodeTransport, protocol.KindTransport, "snapshot: "+err.Error())
	}
	return protocol.SnapshotReadResult{Bytes: n}, nil
}

// endDurable drops what the sandbox's snapshot state holds: an upload
// cut off by the sandbox's end, the restoring call's reader.
func (s *sandbox) endDurable() {
	s.snap.mu.Lock()
	up, rd := s.snap.up, s.snap.rd
	s.snap.up, s.snap.rd = nil, nil
	s.snap.mu.Unlock()
	if up != nil {
		up.w.Abort()
	}
	if rd != nil {
		_ = rd.Close()
	}
}

// offerRestore opens the session's snapshot for a new sandbox's first call:
// the exec frame's Restore, or nil. A snapshot refused (edited, truncated)
// gives a note instead.
func (s *Session) offerRestore(sb *sandbox, loss string) (*protocol.RestoreParams, string) {
	st := s.cfg.Snapshots
	if st == nil || sb.firstExec.Load() {
		return nil, ""
	}
	rd, err := st.Open(s.principal, s.name)
	if err != nil {
		s.log.Warn().Err(err).Msg("snapshot refused")
		return nil, fmt.Sprintf("session '%s' was not restored: %v", s.name, err)
	}
	if rd == nil {
		return nil, ""
	}
	sb.snap.mu.Lock()
	sb.snap.rd = rd
	sb.snap.mu.Unlock()
	m := rd.Meta()
	return &protocol.RestoreParams{
		Session: s.name, Bytes: rd.Size(), Call: m.Call, LastCall: max(m.LastCall, m.Call), Cell: m.Cell, After: loss,
	}, ""
}

// closeRestore closes the reader of a restoring call once it ended.
func (sb *sandbox) closeRestore() {
	sb.snap.mu.Lock()
	rd := sb.snap.rd
	sb.snap.rd = nil
	sb.snap.mu.Unlock()
	if rd != nil {
		_ = rd.Close()
	}
}

// forgetSnapshot deletes the session's snapshot (runtime.reset) and drops
// an upload of it in progress.
func (s *sandbox) forgetSnapshot() {
	st, o, err := s.snapStore()
	if err != nil {
		return
	}
	s.snap.mu.Lock()
	up := s.snap.up
	if up != nil && up.target == o.name {
		s.snap.up = nil
	} else {
		up = nil
	}
	s.snap.mu.Unlock()
	if up != nil {
		up.w.Abort()
	}
	if err := st.Delete(o.principal, o.name); err != nil {
		s.log.Warn().Err(err).Msg("snapshot: could not delete on reset")
	}
}

// snapshotBeforeClose asks the worker for a snapshot and waits until it is
// stored, within exitSnapshotBound (durability on exit): the sandbox is
// being closed politely (idle, evicted, the bridge stopping).
func (s *sandbox) snapshotBeforeClose() {
	if s.cfg.Snapshots == nil || s.cfg.Durability != DurabilityExit || s.snap.owner.Load() == nil || !s.alive() || !s.firstExec.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), exitSnapshotBound)
	defer cancel()
	var res json.RawMessage
	err := s.conn.Call(ctx, protocol.MethodSnapshot, protocol.SnapshotParams{Timeout: exitSnapshotBound.Seconds() - 1}, &res)
	if err != nil {
		s.log.Warn().Err(err).Msg("snapshot on exit failed; the session's state is not durable")
	}
}

// randomID is a fresh upload name.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// restoredNote reports whether notes hold the sandbox's restore note.
func restoredNote(notes []string, session string) bool {
	prefix := "session '" + session + "' restored to call "
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
