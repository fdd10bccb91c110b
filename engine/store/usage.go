package store

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// blockBytes is what one memory costs on disk at least: a file takes whole
// filesystem blocks, so thousands of tiny keys are charged what they take,
// not their byte count.
const blockBytes = 4096

// charge is what a memory file of n bytes counts against the total cap.
func charge(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n + blockBytes - 1) / blockBytes * blockBytes
}

// usage is the memory dir's key count and charged bytes, kept in
// memory/.usage so a write reads one small file instead of the whole
// directory. It is read and written only under the dir's lock, so two
// bridges on one state dir keep one count. Writes order the two files so a
// crash between them leaves the count too high, never too low (see
// commitPut), and a write the count would refuse recounts the disk first.
type usage struct {
	Keys  int   `json:"keys"`
	Bytes int64 `json:"bytes"`
}

func (s *Store) usagePath() string { return filepath.Join(s.MemoryDir(), ".usage") }

// loadUsage returns the recorded usage, recounting the disk when the
// record is missing or unreadable. Call it under the memory dir's lock.
func (s *Store) loadUsage() (usage, error) {
	data, err := readSmall(s.usagePath(), 4096)
	if err == nil {
		var u usage
		if json.Unmarshal(data, &u) == nil && u.Keys >= 0 && u.Bytes >= 0 {
			return u, nil
		}
	}
	return s.recountUsage()
}

// recountUsage counts the memory files on disk, records the result, and
// removes temporary files that crashed writes left: under the lock no
// write is in progress, so every one found is an orphan.
func (s *Store) recountUsage() (usage, error) {
	des, err := os.ReadDir(s.MemoryDir())
	if err != nil {
		return usage{}, err
	}
	var u usage
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(filepath.Join(s.MemoryDir(), name))
			continue
		}
		key, ok := strings.CutSuffix(name, ".json")
		if !ok || checkKey(key) != nil || !de.Type().IsRegular() {
			continue
		}
		if fi, err := de.Info(); err == nil {
			u.Keys++
			u.Bytes += charge(fi.Size())
		}
	}
	return u, s.storeUsage(u)
}

func (s *Store) storeUsage(u usage) error {
	data, _ := json.Marshal(u)
	return writeFile(s.usagePath(), data)
}

// memoryFileSize is the size of key's file when it is a regular file (one
// that usage counts); ok is false otherwise.
func (s *Store) memoryFileSize(key string) (size int64, ok bool) {
	fi, err := os.Lstat(s.memoryPath(key))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Size(), true
}

// commitPut writes key's record, data, within the caps and updates the
// usage record. The usage is written first when it grows and last when it
// shrinks, so a crash in between overcounts; a write the count refuses is
// checked again against a recount of the disk before it is refused.
func (s *Store) commitPut(key string, data []byte) error {
	oldSize, existed := s.memoryFileSize(key)
	u, err := s.loadUsage()
	if err != nil {
		return diskError(err)
	}
	next := func(u usage) usage {
		if !existed {
			u.Keys++
		}
		u.Bytes += charge(int64(len(data))) - charge(oldSize)
		return u
	}
	// A write that does not grow the bytes passes even over the cap (which
	// may have been lowered), so shrinking a value always works.
	overBytes := func(u, n usage) bool { return n.Bytes > int64(s.maxTotal) && n.Bytes > u.Bytes }
	n := next(u)
	if !existed && n.Keys > s.maxKeys || overBytes(u, n) {
		if u, err = s.recountUsage(); err != nil {
			return diskError(err)
		}
		n = next(u)
	}
	if !existed && n.Keys > s.maxKeys {
		return invalid("Memory store is full: it holds %d keys, the limit (MCP_BRIDGE_MEMORY_MAX_KEYS); delete_memory() keys you no longer need, or overwrite existing ones",
			u.Keys)
	}
	if overBytes(u, n) {
		return invalid("Memory store is full: this write needs %d of %d bytes (MCP_BRIDGE_MEMORY_MAX_TOTAL_BYTES; each key counts whole 4 KiB blocks); delete_memory() keys you no longer need",
			n.Bytes, s.maxTotal)
	}
	grows := n.Keys > u.Keys || n.Bytes > u.Bytes
	if grows {
		if err := s.storeUsage(n); err != nil {
			return diskError(err)
		}
	}
	if err := writeFile(s.memoryPath(key), data); err != nil {
		if grows {
			_ = s.storeUsage(u) // the record did not change after all
		}
		return diskError(err)
	}
	if !grows && n != u {
		if err := s.storeUsage(n); err != nil {
			return diskError(err)
		}
	}
	return nil
}

// MemoryDelete removes key and reports whether it existed.
func (s *Store) MemoryDelete(key string) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	deleted := false
	err := s.locked(s.MemoryDir(), func() error {
		size, counted := s.memoryFileSize(key)
		u, err := s.loadUsage()
		if err != nil {
			return diskError(err)
		}
		err = os.Remove(s.memoryPath(key))
		if isNotExist(err) {
			return nil
		}
		if err != nil {
			return diskError(err)
		}
		deleted = true
		if counted {
			u.Keys--
			u.Bytes -= charge(size)
			if u.Keys < 0 || u.Bytes < 0 {
				_, err = s.recountUsage()
			} else {
				err = s.storeUsage(u)
			}
			if err != nil {
				return diskError(err)
			}
		}
		return nil
	})
	return deleted, err
}
