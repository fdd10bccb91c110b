package snapshot

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/bridge-mcp/bridge/engine/fileperm"
)

const (
	// keyBytes is the least key length accepted, and the length made.
	keyBytes = 32
	// maxKeyFile bounds what is read of a key file.
	maxKeyFile = 64 << 10
	// keyRaceWait bounds how long LoadKey waits for another process that
	// created the key file first to finish writing it.
	keyRaceWait = 2 * time.Second
)

// shortKeyError is a key file too short to use; LoadKey waits on it only
// while another process may still be writing the file.
type shortKeyError struct{ path string }

func (e *shortKeyError) Error() string {
	return fmt.Sprintf("key file %s holds fewer than 32 bytes; delete it to have a new one made, or write 64 hex digits", e.path)
}

// LoadKey returns the MAC key kept in the file at path, making the file
// (0600, in a 0700 directory) with 32 random bytes as 64 hex digits when it
// does not exist. An existing file must hold at least 32 bytes after
// trimming white space: hex digits are decoded when they are valid hex of
// at least 32 bytes, otherwise the trimmed bytes are the key as they are.
// warning is non-empty when the file grants its group or others any
// permission; the key still loads.
func LoadKey(path string) (key []byte, warning string, err error) {
	key, warning, err = readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, warning, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", fmt.Errorf("snapshot key: %w", err)
	}
	key = make([]byte, keyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, "", fmt.Errorf("snapshot key: %w", err)
	}
	// O_EXCL: of two processes making the key at once, exactly one writes
	// it and the other uses that one.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return waitKey(path)
	}
	if err != nil {
		return nil, "", fmt.Errorf("snapshot key: %w", err)
	}
	_, err = io.WriteString(f, hex.EncodeToString(key)+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // a partial key file would fail every later start
		return nil, "", fmt.Errorf("snapshot key: %w", err)
	}
	return key, "", nil
}

// waitKey reads a key file another process has just created, giving it a
// moment to finish writing.
func waitKey(path string) ([]byte, string, error) {
	deadline := time.Now().Add(keyRaceWait)
	for {
		key, warning, err := readKey(path)
		var short *shortKeyError
		if !errors.As(err, &short) || time.Now().After(deadline) {
			return key, warning, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReadKey reads an existing key file and never makes one (bridge audit
// verify: a new key could not verify what the old one signed).
func ReadKey(path string) (key []byte, warning string, err error) { return readKey(path) }

// readKey reads and decodes an existing key file.
func readKey(path string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("snapshot key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("snapshot key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("snapshot key: %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, "", fmt.Errorf("snapshot key: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, "", fmt.Errorf("snapshot key: key file %s is larger than %d bytes", path, maxKeyFile)
	}
	var warning string
	// Group permissions of the process's own gid are the owner's (a
	// Kubernetes Secret mounted 0440 with fsGroup; fileperm says why).
	if fileperm.Foreign(fi) != 0 {
		warning = fmt.Sprintf("key file %s is readable by others (mode %o); chmod 600 it", path, fi.Mode().Perm())
	}
	b = bytes.TrimSpace(b)
	if k, err := hex.DecodeString(string(b)); err == nil && len(k) >= keyBytes {
		return k, warning, nil
	}
	if len(b) >= keyBytes {
		return b, warning, nil
	}
	return nil, "", &shortKeyError{path}
}
