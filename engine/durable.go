package engine

// durable.go: sessions that survive (engine/snapshot is the store; actors'
// durable.go takes and offers snapshots).

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/snapshot"
)

// openSnapshots opens the snapshot store under <state>/.bridge/sessions
// with the key of MCP_BRIDGE_KEY_FILE. Without it (durability off, or the
// store cannot be opened: said once at warn level) sessions live only as
// long as their sandboxes, as before.
func openSnapshots(env Env, log zerolog.Logger, loadKey func() ([]byte, error)) (*snapshot.Store, error) {
	if env.Durability == actors.DurabilityOff {
		return nil, nil
	}
	key, err := loadKey()
	if err != nil {
		return nil, fmt.Errorf("sessions will not survive restarts: %w (MCP_BRIDGE_KEY_FILE)", err)
	}
	caps := snapshot.Caps{PerSession: env.SnapshotMax, Total: env.SnapshotTotal, Retention: env.SnapshotRetention}
	st, err := snapshot.Open(filepath.Join(env.StateDir, ".bridge", "sessions"), key, caps, log.With().Str("actor", "snapshots").Logger())
	if err != nil {
		return nil, fmt.Errorf("sessions will not survive restarts: %w", err)
	}
	return st, nil
}

// doctorSessions says whether sessions survive, and what the store holds.
func (e *Engine) doctorSessions(add func(status, name, format string, a ...any)) {
	switch {
	case e.Env.Durability == actors.DurabilityOff:
		add("OK", "sessions", "durability off (MCP_BRIDGE_SESSION_DURABILITY=off): a session lives as long as its container")
	case e.snapErr != nil:
		add("WARN", "sessions", "%v; fix it, or set MCP_BRIDGE_SESSION_DURABILITY=off", e.snapErr)
	case e.snaps != nil:
		n, bytes := e.snaps.Usage()
		add("OK", "sessions", "durability %s: %d snapshots, %s of %s (MCP_BRIDGE_SNAPSHOT_TOTAL) in %s; signed with %s",
			e.Env.Durability, n, sizeText(bytes), sizeText(e.Env.SnapshotTotal), filepath.Join(e.Env.StateDir, ".bridge", "sessions"), e.Env.KeyFile)
	}
}

// snapshotStore adapts *snapshot.Store to actors.SnapshotStore.
type snapshotStore struct{ s *snapshot.Store }

var _ actors.SnapshotStore = snapshotStore{}

func (a snapshotStore) Create(principal, session string) (actors.SnapshotWriter, error) {
	w, err := a.s.Create(principal, session)
	if err != nil {
		return nil, err
	}
	return snapshotWriter{w}, nil
}

func (a snapshotStore) Open(principal, session string) (actors.SnapshotReader, error) {
	r, err := a.s.Open(principal, session)
	if errors.Is(err, snapshot.ErrTampered) {
		return nil, errors.New("its snapshot failed verification (edited, truncated or moved) and was deleted")
	}
	if err != nil || r == nil {
		return nil, err
	}
	return snapshotReader{r}, nil
}

func (a snapshotStore) Stat(principal, session string) (actors.SnapshotMeta, bool) {
	m, ok := a.s.Stat(principal, session)
	return metaOf(m), ok
}

func (a snapshotStore) SetLastCall(principal, session string, n int64) error {
	return a.s.SetLastCall(principal, session, n)
}

func (a snapshotStore) Delete(principal, session string) error { return a.s.Delete(principal, session) }

type snapshotWriter struct{ w *snapshot.Writer }

func (w snapshotWriter) Write(p []byte) (int, error) { return w.w.Write(p) }
func (w snapshotWriter) Size() int64                 { return w.w.Size() }
func (w snapshotWriter) Abort()                      { w.w.Abort() }

func (w snapshotWriter) Commit(m actors.SnapshotMeta) (actors.SnapshotMeta, error) {
	got, err := w.w.Commit(snapshot.Meta{
		Call: m.Call, LastCall: m.LastCall, Cell: m.Cell, Taken: m.Taken, Names: m.Names, Files: m.Files, Left: m.Left, Image: m.Image,
	})
	return metaOf(got), err
}

type snapshotReader struct{ r *snapshot.Reader }

func (r snapshotReader) ReadAt(p []byte, off int64) (int, error) { return r.r.ReadAt(p, off) }
func (r snapshotReader) Size() int64                             { return r.r.Size() }
func (r snapshotReader) Meta() actors.SnapshotMeta               { return metaOf(r.r.Meta()) }
func (r snapshotReader) Close() error                            { return r.r.Close() }

func metaOf(m snapshot.Meta) actors.SnapshotMeta {
	return actors.SnapshotMeta{
		Call: m.Call, LastCall: m.LastCall, Cell: m.Cell, Taken: m.Taken, Bytes: m.Bytes, Names: m.Names, Files: m.Files,
		Left: m.Left, Image: m.Image,
	}
}
