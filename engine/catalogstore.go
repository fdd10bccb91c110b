package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
)

// catalogStore keeps each server's tools/list under
// <state>/.bridge/catalog/<config hash>.json (PXY-8).
type catalogStore struct {
	dir string
	log zerolog.Logger
}

type catalogFile struct {
	FetchedAt time.Time `json:"fetchedAt"`
	Version   string    `json:"version"`
	// Era, Protocol and ProbedAt say how the server was reached
	// (actors/era.go); absent in files written before them: unknown.
	Era      actors.Era        `json:"era,omitempty"`
	Protocol string            `json:"protocol,omitempty"`
	ProbedAt time.Time         `json:"probedAt,omitzero"`
	Tools    []json.RawMessage `json:"tools"`
}

func (s *catalogStore) path(hash string) string { return filepath.Join(s.dir, hash+".json") }

// Load implements actors.CatalogStore.
func (s *catalogStore) Load(hash string) (actors.ServerCatalog, bool) {
	data, err := os.ReadFile(s.path(hash))
	if err != nil {
		return actors.ServerCatalog{}, false
	}
	var f catalogFile
	if err := json.Unmarshal(data, &f); err != nil {
		return actors.ServerCatalog{}, false
	}
	era := f.Era
	if era != actors.EraLegacy && era != actors.EraModern {
		era = actors.EraUnknown // an edited file: probe again
	}
	// The file holds the raw tools/list, entries the bridge cannot use
	// included: parsing marks them again, by today's rules.
	return actors.ServerCatalog{Tools: actors.ParseTools(f.Tools), Version: f.Version, Era: era, Protocol: f.Protocol, Probed: f.ProbedAt}, true
}

// Save implements actors.CatalogStore: an atomic write with mode 0600.
func (s *catalogStore) Save(hash string, c actors.ServerCatalog) {
	f := catalogFile{FetchedAt: time.Now().UTC(), Version: c.Version, Era: c.Era, Protocol: c.Protocol, ProbedAt: c.Probed.UTC(),
		Tools: make([]json.RawMessage, len(c.Tools))}
	if c.Probed.IsZero() {
		f.ProbedAt = time.Time{}
	}
	for i, t := range c.Tools {
		f.Tools[i] = t.Raw
	}
	data, err := json.Marshal(f)
	if err == nil {
		err = writeAtomic(s.path(hash), data)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("catalog cache not written")
	}
}

// Prune deletes cache entries older than 30 days whose hash matches no
// configured server.
func (s *catalogStore) Prune(live map[string]bool) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		hash := strings.TrimSuffix(e.Name(), ".json")
		info, err := e.Info()
		if err != nil || live[hash] || time.Since(info.ModTime()) < 30*24*time.Hour {
			continue
		}
		_ = os.Remove(filepath.Join(s.dir, e.Name()))
	}
}

func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
