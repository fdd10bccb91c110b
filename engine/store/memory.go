package store

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bridge-mcp/bridge/protocol"
)

// maxRecordBytes bounds the memory file read: the largest value cap
// MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES accepts plus room for the key, times and
// rev, so lowering the cap never makes older memories unreadable.
const maxRecordBytes = 1<<28 + 8192

// record is one memory file, <key>.json.
type record struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt float64         `json:"created_at"`
	UpdatedAt float64         `json:"updated_at"`
	Rev       string          `json:"rev"`
}

func (r *record) info(size int) protocol.MemoryInfo {
	return protocol.MemoryInfo{Key: r.Key, Metadata: r.Metadata, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Size: size}
}

// checkKey validates a memory key; the file name is the key plus ".json".
func checkKey(key string) error {
	if !keyRe.MatchString(key) {
		return invalid("Invalid memory key '%s': use 1-128 characters from A-Z a-z 0-9 _ . - (not starting with . or -)", shown(key))
	}
	return nil
}

func (s *Store) memoryPath(key string) string { return filepath.Join(s.MemoryDir(), key+".json") }

// readRecord reads key's record; nil without error when absent.
func (s *Store) readRecord(key string) (*record, int, error) {
	data, err := readSmall(s.memoryPath(key), maxRecordBytes)
	if isNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, 0, err
	}
	return &r, len(data), nil
}

// MemoryGet returns key's value; Found is false when it is absent.
func (s *Store) MemoryGet(key string) (protocol.MemoryRecord, error) {
	if err := checkKey(key); err != nil {
		return protocol.MemoryRecord{}, err
	}
	var out protocol.MemoryRecord
	err := s.locked(s.MemoryDir(), func() error {
		r, n, err := s.readRecord(key)
		if err != nil {
			return diskError(err)
		}
		if r != nil {
			out = protocol.MemoryRecord{Found: true, Value: r.Value, Rev: r.Rev, MemoryInfo: r.info(n)}
		}
		return nil
	})
	return out, err
}

// MemoryPut stores a value (see protocol.MemoryPutParams for Rev).
func (s *Store) MemoryPut(p protocol.MemoryPutParams) (protocol.MemoryPutResult, error) {
	if err := checkKey(p.Key); err != nil {
		return protocol.MemoryPutResult{}, err
	}
	value := bytes.TrimSpace(p.Value)
	if len(value) == 0 || !json.Valid(value) {
		return protocol.MemoryPutResult{}, invalid("Memory value for '%s' is not JSON", p.Key)
	}
	meta := bytes.TrimSpace(p.Metadata)
	if len(meta) > 0 && (!json.Valid(meta) || meta[0] != '{') {
		return protocol.MemoryPutResult{}, invalid("Memory metadata for '%s' must be a JSON object", p.Key)
	}
	if n := len(value) + len(meta); n > s.maxValue {
		return protocol.MemoryPutResult{}, invalid("Memory value for '%s' is %d bytes, over the %d-byte limit (MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES)", p.Key, n, s.maxValue)
	}
	var out protocol.MemoryPutResult
	err := s.locked(s.MemoryDir(), func() error {
		old, _, err := s.readRecord(p.Key)
		if err != nil {
			// A corrupt file is replaced by an unconditional put only.
			if p.Rev != nil {
				return diskError(err)
			}
			old = nil
		}
		if p.Rev != nil {
			cur := ""
			if old != nil {
				cur = old.Rev
			}
			if cur != *p.Rev {
				return &protocol.StoreError{Code: protocol.CodeConflict, Kind: protocol.KindConflict,
					Message: "Memory '" + p.Key + "' changed since it was read"}
			}
		}
		now := unixSeconds(s.now())
		r := record{Key: p.Key, Value: value, Metadata: meta, CreatedAt: now, UpdatedAt: now, Rev: newRev()}
		if old != nil {
			r.CreatedAt = old.CreatedAt
			if len(meta) == 0 && p.KeepMetadata {
				r.Metadata = old.Metadata
			}
		}
		if len(r.Metadata) == 0 {
			r.Metadata = json.RawMessage("{}")
		}
		data, err := json.Marshal(r)
		if err != nil {
			return diskError(err)
		}
		if err := s.commitPut(p.Key, data); err != nil {
			return err
		}
		out = protocol.MemoryPutResult{Rev: r.Rev, MemoryInfo: r.info(len(data))}
		return nil
	})
	return out, err
}

// MemoryList describes the memories after p.After, sorted by key, in pages
// of about the store's list budget: Next is the last key of a page that has
// more after it, "" on the last page. Unreadable files are left out.
func (s *Store) MemoryList(p protocol.MemoryListParams) (protocol.MemoryListResult, error) {
	out := protocol.MemoryListResult{Memories: []protocol.MemoryInfo{}}
	err := s.locked(s.MemoryDir(), func() error {
		des, err := os.ReadDir(s.MemoryDir())
		if err != nil {
			return diskError(err)
		}
		keys := make([]string, 0, len(des))
		for _, de := range des {
			if key, ok := strings.CutSuffix(de.Name(), ".json"); ok && key > p.After && checkKey(key) == nil {
				keys = append(keys, key)
			}
		}
		sort.Strings(keys)
		used := 0
		for i, key := range keys {
			r, n, err := s.readRecord(key)
			if err != nil || r == nil {
				continue
			}
			info := r.info(n)
			// An entry's JSON is its key, metadata and about 100 bytes of
			// names and numbers; a page holds at least one.
			cost := len(info.Key) + len(info.Metadata) + 128
			if used > 0 && used+cost > s.listBytes {
				out.Next = keys[i-1]
				return nil
			}
			used += cost
			out.Memories = append(out.Memories, info)
		}
		return nil
	})
	return out, err
}
