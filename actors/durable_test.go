package actors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// memSnapshots is an in-memory SnapshotStore keyed by SessionKey.
type memSnapshots struct {
	mu      sync.Mutex
	stored  map[string][]byte
	meta    map[string]SnapshotMeta
	max     int64
	aborted int
}

func newMemSnapshots(max int64) *memSnapshots {
	return &memSnapshots{stored: map[string][]byte{}, meta: map[string]SnapshotMeta{}, max: max}
}

type memWriter struct {
	s   *memSnapshots
	key string
	buf bytes.Buffer
}

func (w *memWriter) Write(p []byte) (int, error) {
	if int64(w.buf.Len()+len(p)) > w.s.max {
		return 0, errors.New("snapshot: larger than MCP_BRIDGE_SNAPSHOT_MAX")
	}
	return w.buf.Write(p)
}
func (w *memWriter) Size() int64 { return int64(w.buf.Len()) }
func (w *memWriter) Abort() {
	w.s.mu.Lock()
	w.s.aborted++
	w.s.mu.Unlock()
}
func (w *memWriter) Commit(m SnapshotMeta) (SnapshotMeta, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	m.Bytes = int64(w.buf.Len())
	w.s.stored[w.key] = append([]byte(nil), w.buf.Bytes()...)
	w.s.meta[w.key] = m
	return m, nil
}

type memReader struct {
	*bytes.Reader
	m SnapshotMeta
}

func (r memReader) Meta() SnapshotMeta { return r.m }
func (r memReader) Close() error       { return nil }

func (s *memSnapshots) Create(principal, session string) (SnapshotWriter, error) {
	return &memWriter{s: s, key: SessionKey(principal, session)}, nil
}
func (s *memSnapshots) Open(principal, session string) (SnapshotReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.stored[SessionKey(principal, session)]
	if !ok {
		return nil, nil
	}
	return memReader{bytes.NewReader(data), s.meta[SessionKey(principal, session)]}, nil
}
func (s *memSnapshots) Stat(principal, session string) (SnapshotMeta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.meta[SessionKey(principal, session)]
	return m, ok
}
func (s *memSnapshots) SetLastCall(string, string, int64) error { return nil }
func (s *memSnapshots) Delete(principal, session string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stored, SessionKey(principal, session))
	delete(s.meta, SessionKey(principal, session))
	return nil
}

// snapSandbox is a sandbox of principal's session name, with st as its
// store, built by hand for the snapshot handlers.
func snapSandbox(st SnapshotStore, principal, name string, live ...string) *sandbox {
	sb := &sandbox{cfg: &SandboxConfig{Snapshots: st, MaxFrame: 1 << 20, Image: "img"}, log: zerolog.Nop()}
	sb.snap.owner.Store(&snapOwner{principal: principal, name: name, exists: func(key string) bool {
		for _, l := range live {
			if l == key {
				return true
			}
		}
		return false
	}})
	return sb
}

// snapCall runs one of the sandbox's snapshot requests.
func snapCall(t *testing.T, sb *sandbox, method string, params any) (any, error) {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	msg := json.RawMessage(raw)
	return sb.serveRequest(t.Context(), &jsonrpc2.Request{Method: method, Params: &msg})
}

func upload(t *testing.T, sb *sandbox, target *string, chunks ...string) error {
	t.Helper()
	res, err := snapCall(t, sb, protocol.MethodSnapshotBegin, protocol.SnapshotBeginParams{Call: 3, Session: target})
	if err != nil {
		return err
	}
	id := res.(protocol.SnapshotBeginResult).Upload
	var off int64
	for _, c := range chunks {
		sb.onData([]byte(fmt.Sprintf("#W %s %d", id, off)), []byte(c))
		off += int64(len(c))
		if _, err := snapCall(t, sb, protocol.MethodSnapshotWrite, protocol.SnapshotWriteParams{Upload: id, Offset: off}); err != nil {
			return err
		}
	}
	_, err = snapCall(t, sb, protocol.MethodSnapshotEnd, protocol.SnapshotEndParams{Upload: id, Call: 3, Cell: 2, Names: 1, Left: []string{"fh (open file)"}, Taken: float64(time.Now().Unix()), Python: "3.13.5"})
	return err
}

// TestSnapshotRequests: the sandbox's snapshot requests go to its own
// (principal, session) whatever it sends, writes must come in order and
// within the chunk size, a fork targets a new session of the same
// principal only, reset forgets the snapshot, and reads serve only the one
// offered.
func TestSnapshotRequests(t *testing.T) {
	st := newMemSnapshots(16)
	alice := snapSandbox(st, "alice", "s", SessionKey("alice", "busy"))
	if err := upload(t, alice, nil, "abc", "def"); err != nil {
		t.Fatal(err)
	}
	if got, want := string(st.stored[SessionKey("alice", "s")]), "abcdef"; got != want {
		t.Errorf("stored %q, want %q", got, want)
	}
	if m := st.meta[SessionKey("alice", "s")]; m.Call != 3 || m.Cell != 2 || m.Image != "img python 3.13.5" || len(m.Left) != 1 {
		t.Errorf("meta %+v", m)
	}

	// Data lines: taken in order; one out of order fails the upload, and
	// its next request says so.
	res, _ := snapCall(t, alice, protocol.MethodSnapshotBegin, protocol.SnapshotBeginParams{Call: 5})
	lid := res.(protocol.SnapshotBeginResult).Upload
	alice.onData([]byte("#W "+lid+" 0"), []byte("gh"))
	alice.onData([]byte("#W "+lid+" 2"), []byte("ij"))
	if _, err := snapCall(t, alice, protocol.MethodSnapshotWrite, protocol.SnapshotWriteParams{Upload: lid, Offset: 4}); err != nil {
		t.Errorf("sync after two data lines: %v", err)
	}
	if _, err := snapCall(t, alice, protocol.MethodSnapshotEnd, protocol.SnapshotEndParams{Upload: lid, Call: 5}); err != nil {
		t.Fatal(err)
	}
	if got := string(st.stored[SessionKey("alice", "s")]); got != "ghij" {
		t.Errorf("stored from data lines: %q", got)
	}
	res, _ = snapCall(t, alice, protocol.MethodSnapshotBegin, protocol.SnapshotBeginParams{Call: 6})
	lid = res.(protocol.SnapshotBeginResult).Upload
	alice.onData([]byte("#W "+lid+" 7"), []byte("k"))
	if _, err := snapCall(t, alice, protocol.MethodSnapshotEnd, protocol.SnapshotEndParams{Upload: lid, Call: 6}); err == nil || !strings.Contains(err.Error(), "out of order or over the chunk size (something else wrote on the link)") {
		t.Errorf("end after a data line out of order: %v", err)
	}
	if got := string(st.stored[SessionKey("alice", "s")]); got != "ghij" {
		t.Errorf("a failed upload replaced the snapshot: %q", got)
	}
	if err := upload(t, alice, nil, "abc", "def"); err != nil { // as before, for the reads below
		t.Fatal(err)
	}

	// Out of order: the upload is dropped.
	res, _ = snapCall(t, alice, protocol.MethodSnapshotBegin, protocol.SnapshotBeginParams{Call: 4})
	id := res.(protocol.SnapshotBeginResult).Upload
	if _, err := snapCall(t, alice, protocol.MethodSnapshotWrite, protocol.SnapshotWriteParams{Upload: id, Offset: 5}); err == nil {
		t.Error("a check at the wrong offset passed")
	}
	alice.onData([]byte("#W "+id+" 0"), []byte("x"))
	if _, err := snapCall(t, alice, protocol.MethodSnapshotWrite, protocol.SnapshotWriteParams{Upload: id, Offset: 1}); err == nil {
		t.Error("the dropped upload took a write")
	}

	// Over the store's cap: the error names the session and the variable.
	err := upload(t, alice, nil, strings.Repeat("x", 10), strings.Repeat("y", 10))
	if err == nil || !strings.Contains(err.Error(), "session 's' is no longer durable") || !strings.Contains(err.Error(), "MCP_BRIDGE_SNAPSHOT_MAX") {
		t.Errorf("over the cap: %v", err)
	}

	for _, c := range []struct {
		target, want string
	}{
		{"s", "name another session"},
		{"busy", "session 'busy' is live"},
		{"../x", "1-64 characters"},
		{"bob/s", "1-64 characters"},
	} {
		target := c.target
		if err := upload(t, alice, &target, "z"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("fork into %q: %v, want %q", c.target, err, c.want)
		}
	}
	target := "copy"
	if err := upload(t, alice, &target, "fork"); err != nil {
		t.Fatal(err)
	}
	if got := string(st.stored[SessionKey("alice", "copy")]); got != "fork" {
		t.Errorf("the fork stored %q", got)
	}
	if err := upload(t, alice, &target, "again"); err == nil || !strings.Contains(err.Error(), "has a snapshot of its own") {
		t.Errorf("a fork over a session with a snapshot: %v", err)
	}

	// Another principal's sandbox of the same session name sees nothing of
	// alice's, and reads only what it is offered.
	bob := snapSandbox(st, "bob", "s")
	if _, err := snapCall(t, bob, protocol.MethodSnapshotRead, protocol.SnapshotReadParams{Offset: 0, Length: 10}); err == nil {
		t.Error("a read with no snapshot offered was served")
	}
	rp, note := (&Session{principal: "bob", name: "s", cfg: bob.cfg, log: zerolog.Nop()}).offerRestore(bob, "")
	if rp != nil || note != "" {
		t.Errorf("bob was offered %+v %q", rp, note)
	}
	rp, _ = (&Session{principal: "alice", name: "s", cfg: alice.cfg, log: zerolog.Nop()}).offerRestore(alice, "idle")
	if rp == nil || rp.Bytes != 6 || rp.Call != 3 || rp.Cell != 2 || rp.After != "idle" {
		t.Fatalf("alice's offer: %+v", rp)
	}
	got, err := snapCall(t, alice, protocol.MethodSnapshotRead, protocol.SnapshotReadParams{Offset: 2, Length: 10})
	if err != nil || string(got.(protocol.SnapshotReadResult).Data) != "cdef" {
		t.Errorf("read: %v %v", got, err)
	}
	alice.closeRestore()

	// Off: every request says so.
	off := snapSandbox(nil, "", "s")
	if _, err := snapCall(t, off, protocol.MethodSnapshotBegin, protocol.SnapshotBeginParams{}); err == nil || !strings.Contains(err.Error(), "MCP_BRIDGE_SESSION_DURABILITY=off") {
		t.Errorf("with durability off: %v", err)
	}

	// reset forgets.
	alice.forgetSnapshot()
	if _, ok := st.Stat("alice", "s"); ok {
		t.Error("the snapshot survived forgetSnapshot")
	}
}
