// Package oauth signs the bridge in to remote MCP servers that require OAuth
// 2.1 (the MCP authorization spec): protected resource and authorization
// server metadata discovery, scope selection from challenges, client
// registration (pre-registered, Client ID Metadata Document, dynamic), the
// authorization code flow with PKCE on a loopback redirect, refresh, and a
// round tripper that attaches a server's token to that server's requests only
// and reacts to 401 and 403 insufficient_scope challenges.
//
// Tokens live in 0600 files in a 0700 directory under the state dir; they
// never appear in log lines or error texts, and never leave the host process
// (the sandbox reaches servers through the bridge, never with a token).
package oauth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Record is what the bridge keeps for one server and resource: the client
// it registered as and the tokens it holds. The token fields are secrets.
type Record struct {
	Server        string    `json:"server"`
	Resource      string    `json:"resource"`                     // the server URL the token is bound to
	Indicator     string    `json:"resource_indicator,omitempty"` // the RFC 8707 resource sent with every grant
	Issuer        string    `json:"issuer"`
	TokenEndpoint string    `json:"token_endpoint"`
	ClientID      string    `json:"client_id"`
	ClientSecret  string    `json:"client_secret,omitempty"`
	AuthMethod    string    `json:"auth_method"` // client_secret_basic, client_secret_post or none
	RedirectURI   string    `json:"redirect_uri,omitempty"`
	Registered    bool      `json:"registered,omitempty"` // ClientID came from dynamic registration
	AccessToken   string    `json:"access_token,omitempty"`
	RefreshToken  string    `json:"refresh_token,omitempty"`
	Scope         string    `json:"scope,omitempty"`
	ExpiresAt     time.Time `json:"expires_at,omitzero"`
	RefreshAt     time.Time `json:"refresh_at,omitzero"` // when to refresh ahead of ExpiresAt
}

// Valid reports whether the access token can be used at now: present and
// not expired.
func (r *Record) Valid(now time.Time) bool {
	return r != nil && r.AccessToken != "" && (r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt))
}

// Fresh reports whether the token is not yet due for refresh: a minute
// before expiry, or half its lifetime for a short-lived one (RefreshAt). A
// token that is not fresh is refreshed ahead of its expiry when it can be.
func (r *Record) Fresh(now time.Time) bool {
	if !r.Valid(now) || r.ExpiresAt.IsZero() {
		return r.Valid(now)
	}
	due := r.RefreshAt
	if due.IsZero() {
		due = r.ExpiresAt.Add(-time.Minute)
	}
	return now.Before(due)
}

// String never shows the secrets, so a record in a log or error stays safe.
func (r Record) String() string {
	return fmt.Sprintf("oauth record for %s (%s)", r.Server, r.Resource)
}

// GoString is String for %#v.
func (r Record) GoString() string { return r.String() }

// ErrCorrupt is a token file that cannot be read as a record; the server
// counts as signed out and the next sign-in replaces the file.
var ErrCorrupt = errors.New("token file is corrupt")

// maxRecord bounds one token file.
const maxRecord = 1 << 20

// Store is the token directory. Every write happens under an exclusive
// file lock and replaces the file atomically, because a stdio bridge and a
// `bridge exec` may refresh the same token at once.
type Store struct {
	dir string
}

// NewStore returns the store under stateDir/.bridge/oauth.
func NewStore(stateDir string) *Store {
	return &Store{dir: filepath.Join(stateDir, ".bridge", "oauth")}
}

// Dir is the token directory.
func (s *Store) Dir() string { return s.dir }

// ensureDir creates the directory 0700 and narrows an existing one: tokens
// must not be readable by other users. A symlink in its place is refused.
func (s *Store) ensureDir() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("token dir: %w", err)
	}
	st, err := os.Lstat(s.dir)
	if err != nil {
		return fmt.Errorf("token dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("token dir: %s is not a directory", s.dir)
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(s.dir, 0o700); err != nil {
			return fmt.Errorf("token dir: %w", err)
		}
	}
	return nil
}

// path is the file of one server and resource; the name is a hash, so no
// server name or URL can escape the directory.
func (s *Store) path(server, resource string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + resource))
	return filepath.Join(s.dir, "token-"+hex.EncodeToString(sum[:16])+".json")
}

// Load reads the record of server and resource: nil without one,
// ErrCorrupt when the file does not parse or names another server.
func (s *Store) Load(server, resource string) (*Record, error) {
	return s.read(s.path(server, resource), server, resource)
}

func (s *Store) read(path, server, resource string) (*Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	var r Record
	buf := make([]byte, maxRecord+1)
	n, _ := readFull(f, buf)
	if n > maxRecord || json.Unmarshal(buf[:n], &r) != nil {
		return nil, ErrCorrupt
	}
	if server != "" && (r.Server != server || r.Resource != resource) {
		return nil, ErrCorrupt
	}
	return &r, nil
}

func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Update runs fn on the current record (nil when none or corrupt) under the
// lock and saves what it returns; a nil result saves nothing.
func (s *Store) Update(server, resource string, fn func(*Record) (*Record, error)) (*Record, error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	unlock, err := lockDir(s.dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cur, err := s.Load(server, resource)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, err
	}
	next, err := fn(cur)
	if err != nil || next == nil {
		return cur, err
	}
	next.Server, next.Resource = server, resource
	if err := s.write(s.path(server, resource), next); err != nil {
		return nil, err
	}
	return next, nil
}

// Save replaces the record of r.Server and r.Resource.
func (s *Store) Save(r *Record) error {
	_, err := s.Update(r.Server, r.Resource, func(*Record) (*Record, error) { return r, nil })
	return err
}

// write replaces path atomically: a 0600 temp file in the same directory,
// synced, then renamed over the old one.
func (s *Store) write(path string, r *Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	f, err := os.CreateTemp(s.dir, ".token-*")
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename it is already gone
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("token file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("token file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	return nil
}

// Delete removes every record of server; it reports how many it removed.
func (s *Store) Delete(server string) (int, error) {
	if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	unlock, err := lockDir(s.dir)
	if err != nil {
		return 0, err
	}
	defer unlock()
	recs, paths := s.scan()
	n := 0
	for i, r := range recs {
		if r.Server == server {
			if err := os.Remove(paths[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, fmt.Errorf("token file: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// List returns every readable record.
func (s *Store) List() []*Record {
	recs, _ := s.scan()
	return recs
}

func (s *Store) scan() ([]*Record, []string) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil
	}
	var recs []*Record
	var paths []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "token-") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(s.dir, e.Name())
		if r, err := s.read(p, "", ""); err == nil && r != nil {
			recs = append(recs, r)
			paths = append(paths, p)
		}
	}
	return recs, paths
}
