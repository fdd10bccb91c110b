// Package oauth signs the bridge in to remote MCP servers that require OAuth
// 2.1 (the MCP authorization spec): protected resource and authorization
// server metadata discovery, scope selection from challenges, client
// registration (pre-registered, Client ID Metadata Document, dynamic), the
// authorization code flow with PKCE on a loopback redirect, refresh, and a
// round tripper that attaches a server's token to that server's requests only
// and reacts to 401 and 403 insufficient_scope challenges.
//
// Under bridge serve a principal signs in as themselves (identity:
// principal): the redirect is serve's own /oauth/callback (Callbacks,
// callbacks.go), whose state binds the code to the one sign-in of one
// principal that registered it, used once, until it expires.
//
// Tokens live in 0600 files in a 0700 directory under the state dir; they
// never appear in log lines or error texts, and never leave the host process
// (the sandbox reaches servers through the bridge, never with a token).
//
// A token file, token-<hash of server and resource>.json, is encrypted at
// rest. It is one line of four space-separated fields, the last three
// base64url without padding:
//
//	bridge-token-v1 SERVER RESOURCE SEALED
//
// SERVER and RESOURCE are in the clear so List and Delete can tell a file's
// pair without opening it (Delete removes a file sealed under another key
// too). SEALED is a 12-byte random nonce followed by the AES-256-GCM
// ciphertext of the Record's JSON; the key is HKDF-SHA-256 of the bridge
// key (MCP_BRIDGE_KEY_FILE) with info "bridge oauth token files v1", and
// the additional data is "bridge-token-v1" then the length-prefixed server
// and resource, so a file copied under another pair's name, or with its
// header edited, does not open. The previous version wrote the Record's
// JSON in the clear; such a file still reads, every write seals, and
// Store.Migrate seals the ones left.
package oauth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	Account       string    `json:"account,omitempty"` // the upstream account, when its ID token named one; not a secret
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

// unusable reports whether err is a token file the next write replaces:
// one that is corrupt or sealed under another key.
func unusable(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrKey)
}

// maxRecord bounds one token file.
const maxRecord = 1 << 20

// Store is the token directory. Every write happens under an exclusive
// file lock and replaces the file atomically, because a stdio bridge and a
// `bridge exec` may refresh the same token at once. Every write seals the
// record; without a bridge key (nil or shorter than 32 bytes) the store
// reads plaintext files only and every write fails, so no token is ever
// written in the clear.
type Store struct {
	dir string
	key []byte // the derived AES-256 key; nil without a usable bridge key
}

// NewStore returns the store under stateDir/.bridge/oauth, sealing with a
// key derived from key, the bridge key of MCP_BRIDGE_KEY_FILE.
func NewStore(stateDir string, key []byte) *Store {
	return NewStoreAt(filepath.Join(stateDir, ".bridge", "oauth"), key)
}

// NewStoreAt returns the store in dir as is (a principal's own store),
// sealing with a key derived from key.
func NewStoreAt(dir string, key []byte) *Store {
	return &Store{dir: dir, key: deriveKey(key)}
}

// String names the directory only, so a store in a log line or error
// never shows its key.
func (s *Store) String() string { return "token store " + s.dir }

// GoString is String for %#v.
func (s *Store) GoString() string { return s.String() }

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
// ErrCorrupt when the file does not parse or names another pair, ErrKey
// when it was sealed under another key.
func (s *Store) Load(server, resource string) (*Record, error) {
	tf, err := s.read(s.path(server, resource))
	if err != nil || tf == nil {
		return nil, err
	}
	if !tf.known || tf.server != server || tf.resource != resource {
		// Checked before tf.err: a file copied from another pair is
		// corrupt here whichever key sealed it.
		return nil, ErrCorrupt
	}
	return tf.rec, tf.err
}

// read reads and decodes the file at path: nil when there is none, an
// error only when the file cannot be read at all.
func (s *Store) read(path string) (*tokenFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	tf := tokenFile{err: ErrCorrupt}
	if len(data) <= maxRecord {
		tf = s.decode(data)
	}
	tf.path = path
	return &tf, nil
}

// Update runs fn on the current record (nil when none, corrupt or sealed
// under another key) under the lock and saves what it returns, sealed; a
// nil result saves nothing.
func (s *Store) Update(server, resource string, fn func(*Record) (*Record, error)) (*Record, error) {
	if s.key == nil {
		// Before fn, which may already have spent a grant.
		return nil, errNoKey
	}
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	unlock, err := lockDir(s.dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cur, err := s.Load(server, resource)
	if err != nil && !unusable(err) {
		return nil, err
	}
	next, err := fn(cur)
	if err != nil || next == nil {
		return cur, err
	}
	next.Server, next.Resource = server, resource
	data, err := s.seal(next)
	if err != nil {
		return nil, err
	}
	if err := s.write(s.path(server, resource), data); err != nil {
		return nil, err
	}
	return next, nil
}

// Save replaces the record of r.Server and r.Resource.
func (s *Store) Save(r *Record) error {
	_, err := s.Update(r.Server, r.Resource, func(*Record) (*Record, error) { return r, nil })
	return err
}

// write replaces path with data atomically: a 0600 temp file in the same
// directory, synced, then renamed over the old one. Callers hold the lock.
func (s *Store) write(path string, data []byte) error {
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

// Delete removes every token file of server, including ones sealed under
// another key; it reports how many it removed.
func (s *Store) Delete(server string) (int, error) {
	if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	unlock, err := lockDir(s.dir)
	if err != nil {
		return 0, err
	}
	defer unlock()
	n := 0
	for _, tf := range s.scan() {
		if tf.known && tf.server == server {
			if err := os.Remove(tf.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, fmt.Errorf("token file: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// Migrate seals every plaintext token file the previous version wrote, in
// place and atomically, under the lock; it reports how many it sealed. A
// missing directory has none.
func (s *Store) Migrate() (int, error) {
	if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if s.key == nil {
		return 0, errNoKey
	}
	if err := s.ensureDir(); err != nil {
		return 0, err
	}
	unlock, err := lockDir(s.dir)
	if err != nil {
		return 0, err
	}
	defer unlock()
	n := 0
	for _, tf := range s.scan() {
		if tf.sealed || tf.rec == nil {
			continue
		}
		data, err := s.seal(tf.rec)
		if err != nil {
			return n, err
		}
		if err := s.write(tf.path, data); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// List returns every record that reads with this store's key.
func (s *Store) List() []*Record {
	var recs []*Record
	for _, tf := range s.scan() {
		if tf.rec != nil {
			recs = append(recs, tf.rec)
		}
	}
	return recs
}

// scan reads every token file of the directory; a file that cannot be
// read at all is left out.
func (s *Store) scan() []*tokenFile {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	var out []*tokenFile
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "token-") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if tf, err := s.read(filepath.Join(s.dir, e.Name())); err == nil && tf != nil {
			out = append(out, tf)
		}
	}
	return out
}
