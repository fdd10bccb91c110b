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
	FetchedAt time.Time         `json:"fetchedAt"`
	Version   string            `json:"version"`
	Tools     []json.RawMessage `json:"tools"`
}

func (s *catalogStore) path(hash string) string { return filepath.Join(s.dir, hash+".json") }

// Load implements actors.CatalogStore.
func (s *catalogStore) Load(hash string) ([]actors.ToolInfo, bool) {
	data, err := os.ReadFile(s.path(hash))
	if err != nil {
		return nil, false
	}
	var f catalogFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, false
	}
	// The file holds the raw tools/list, entries the bridge cannot use
	// included: parsing marks them again, by today's rules.
	return actors.ParseTools(f.Tools), true
}

// Save implements actors.CatalogStore: an atomic write with mode 0600.
func (s *catalogStore) Save(hash, version string, tools []actors.ToolInfo) {
	f := catalogFile{FetchedAt: time.Now().UTC(), Version: version, Tools: make([]json.RawMessage, len(tools))}
	for i, t := range tools {
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
