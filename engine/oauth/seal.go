package oauth

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

const (
	// sealMagic starts every encrypted token file and is the first part of
	// its additional data: a later format cannot be opened as this one.
	sealMagic = "bridge-token-v1"
	// sealInfo is the HKDF info of the token files' key, so the bridge key's
	// other uses (snapshots, audit) never share a key with token files.
	sealInfo = "bridge oauth token files v1"
	// minKey is the shortest bridge key the store seals with: 256 bits.
	minKey = 32
)

// ErrKey is a token file that does not open with this bridge's key: sealed
// under another MCP_BRIDGE_KEY_FILE, or altered. Like ErrCorrupt, the server
// counts as signed out and the next sign-in replaces the file.
var ErrKey = errors.New("token file was sealed with another key (MCP_BRIDGE_KEY_FILE changed?): sign in again")

// errNoKey is a store made without a usable key: it reads plaintext files
// of the previous version but writes nothing, so no token is stored in
// the clear.
var errNoKey = errors.New("token store: no encryption key")

// b64 encodes the fields of a sealed file: no padding, no spaces, no
// newlines, so a file is one line of space-separated fields.
var b64 = base64.RawURLEncoding

// deriveKey returns the AES-256 key of token files, or nil when key is
// missing or shorter than minKey. The bridge key itself is not kept.
func deriveKey(key []byte) []byte {
	if len(key) < minKey {
		return nil
	}
	k, err := hkdf.Key(sha256.New, key, nil, sealInfo, 32)
	if err != nil { // only for a length HKDF cannot produce
		return nil
	}
	return k
}

// aead is AES-256-GCM with a random 12-byte nonce that Seal prepends to
// the ciphertext and Open takes from it. It is built per use, so a Store
// shares no cipher state between goroutines.
func (s *Store) aead() (cipher.AEAD, error) {
	if s.key == nil {
		return nil, errNoKey
	}
	b, err := aes.NewCipher(s.key)
	if err != nil {
		return nil, fmt.Errorf("token cipher: %w", err)
	}
	a, err := cipher.NewGCMWithRandomNonce(b)
	if err != nil {
		return nil, fmt.Errorf("token cipher: %w", err)
	}
	return a, nil
}

// additionalData binds a ciphertext to the format and to its server and
// resource: a file copied under another pair's name, or with its clear
// header edited to name another pair, does not open. Lengths prefix the
// parts, so no two pairs give the same bytes.
func additionalData(server, resource string) []byte {
	ad := []byte(sealMagic)
	ad = binary.AppendUvarint(ad, uint64(len(server)))
	ad = append(ad, server...)
	ad = binary.AppendUvarint(ad, uint64(len(resource)))
	return append(ad, resource...)
}

// seal returns the file content of r: one line
// "bridge-token-v1 SERVER RESOURCE SEALED\n", each field base64url.
func (s *Store) seal(r *Record) ([]byte, error) {
	a, err := s.aead()
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	sealed := a.Seal(nil, nil, plain, additionalData(r.Server, r.Resource))
	clear(plain)
	line := make([]byte, 0, len(sealMagic)+3+b64.EncodedLen(len(r.Server))+b64.EncodedLen(len(r.Resource))+b64.EncodedLen(len(sealed))+1)
	line = append(line, sealMagic...)
	for _, f := range [][]byte{[]byte(r.Server), []byte(r.Resource), sealed} {
		line = append(line, ' ')
		line = b64.AppendEncode(line, f)
	}
	return append(line, '\n'), nil
}

// tokenFile is one token file as read. server and resource are known
// whenever the file's pair can be told (a sealed file's clear header, or a
// plaintext record that parses), even when rec is nil because it does not
// open; Delete relies on that to remove files of another key.
type tokenFile struct {
	path             string
	server, resource string
	known            bool    // server and resource were read
	sealed           bool    // false: plaintext JSON of the previous version
	rec              *Record // nil when err != nil
	err              error   // ErrCorrupt, ErrKey or errNoKey
}

// decode reads the content of a token file: a sealed line, or the
// plaintext JSON record the previous version wrote.
func (s *Store) decode(data []byte) tokenFile {
	if !bytes.HasPrefix(data, []byte(sealMagic+" ")) {
		var r Record
		if json.Unmarshal(data, &r) != nil {
			return tokenFile{err: ErrCorrupt}
		}
		return tokenFile{server: r.Server, resource: r.Resource, known: true, rec: &r}
	}
	fields := bytes.Fields(data)
	if len(fields) != 4 || !bytes.Equal(fields[0], []byte(sealMagic)) {
		return tokenFile{sealed: true, err: ErrCorrupt}
	}
	var parts [3][]byte
	for i, f := range fields[1:] {
		p, err := b64.DecodeString(string(f))
		if err != nil {
			return tokenFile{sealed: true, err: ErrCorrupt}
		}
		parts[i] = p
	}
	tf := tokenFile{server: string(parts[0]), resource: string(parts[1]), known: true, sealed: true}
	a, err := s.aead()
	if err != nil {
		tf.err = err
		return tf
	}
	plain, err := a.Open(nil, nil, parts[2], additionalData(tf.server, tf.resource))
	if err != nil {
		// GCM does not tell a wrong key from altered bytes; a changed key
		// file is the likely cause and signing in again fixes both.
		tf.err = ErrKey
		return tf
	}
	defer clear(plain)
	var r Record
	if json.Unmarshal(plain, &r) != nil || r.Server != tf.server || r.Resource != tf.resource {
		tf.err = ErrCorrupt
		return tf
	}
	tf.rec = &r
	return tf
}
