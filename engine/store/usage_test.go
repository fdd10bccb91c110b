package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bridge-mcp/bridge/protocol"
)

func put(s *Store, key, value string) error {
	_, err := s.MemoryPut(protocol.MemoryPutParams{Key: key, Value: json.RawMessage(value)})
	return err
}

// recorded reads memory/.usage.
func recorded(t *testing.T, s *Store) usage {
	t.Helper()
	data, err := os.ReadFile(s.usagePath())
	if err != nil {
		t.Fatal(err)
	}
	var u usage
	if err := json.Unmarshal(data, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// onDisk counts the memory files and their charge the slow way.
func onDisk(t *testing.T, s *Store) usage {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(s.MemoryDir(), "*.json"))
	var u usage
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		u.Keys++
		u.Bytes += charge(fi.Size())
	}
	return u
}

// TestMemoryChargesBlocks: every key counts at least one 4 KiB block
// against the total, as on disk; 9,401 tiny keys were counted as 1.5 MB and
// took 37.9 MB.
func TestMemoryChargesBlocks(t *testing.T) {
	cases := []struct {
		n    int64
		want int64
	}{{0, 0}, {1, 4096}, {4096, 4096}, {4097, 8192}, {10000, 12288}}
	for _, c := range cases {
		if got := charge(c.n); got != c.want {
			t.Errorf("charge(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	s := New(t.TempDir(), 1024, 4*4096)
	for i := 0; i < 4; i++ {
		if err := put(s, fmt.Sprintf("k%d", i), "1"); err != nil {
			t.Fatalf("key %d of 4: %v", i, err)
		}
	}
	err := put(s, "k4", "1")
	if err == nil || kindOf(err) != protocol.KindInvalidArguments || !strings.Contains(err.Error(), "needs 20480 of 16384 bytes") ||
		!strings.Contains(err.Error(), "each key counts whole 4 KiB blocks") {
		t.Errorf("a 5th tiny key in 16 KiB: %v, want the total cap error", err)
	}
	if err := put(s, "k0", `"overwrite"`); err != nil {
		t.Errorf("overwriting a key within its block: %v", err)
	}
	// With the cap lowered under what is stored, shrinking still works
	// and growing does not.
	lowered := New(filepath.Dir(filepath.Dir(s.MemoryDir())), 8192, 2*4096)
	if err := put(lowered, "k1", `"`+strings.Repeat("g", 5000)+`"`); err == nil {
		t.Errorf("growing a key over a lowered cap was allowed")
	}
	if err := put(lowered, "k1", "2"); err != nil {
		t.Errorf("rewriting a key in its block over a lowered cap: %v", err)
	}
	if got, want := recorded(t, s), onDisk(t, s); got != want {
		t.Errorf("usage record %+v, disk %+v", got, want)
	}
}

// TestMemoryMaxKeys: a new key beyond the key cap is refused with a clear
// error; overwriting is not a new key; a delete makes room.
func TestMemoryMaxKeys(t *testing.T) {
	s := New(t.TempDir(), 1024, 1<<20, WithMaxKeys(3))
	for _, k := range []string{"a", "b", "c"} {
		if err := put(s, k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	err := put(s, "d", "1")
	if want := "Memory store is full: it holds 3 keys, the limit (MCP_BRIDGE_MEMORY_MAX_KEYS)"; err == nil || !strings.HasPrefix(err.Error(), want) || kindOf(err) != protocol.KindInvalidArguments {
		t.Errorf("a 4th key: %v, want %q", err, want)
	}
	if err := put(s, "a", "2"); err != nil {
		t.Errorf("overwrite at the key cap: %v", err)
	}
	if ok, err := s.MemoryDelete("b"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := put(s, "d", "1"); err != nil {
		t.Errorf("a new key after a delete: %v", err)
	}
	if got, want := recorded(t, s), (usage{Keys: 3, Bytes: 3 * 4096}); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}

// TestMemoryUsageRecovers: a missing, corrupt or too high usage record
// (a crash between the record and the value) is corrected from the disk,
// and temporary files of crashed writes are removed.
func TestMemoryUsageRecovers(t *testing.T) {
	s := New(t.TempDir(), 1024, 3*4096, WithMaxKeys(3))
	for _, k := range []string{"a", "b"} {
		if err := put(s, k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	orphan := filepath.Join(s.MemoryDir(), ".tmp-123")
	for _, bad := range []string{"", "not json", `{"keys": -1, "bytes": 0}`, `{"keys": 3, "bytes": 99999}`} {
		if bad == "" {
			os.Remove(s.usagePath())
		} else if err := os.WriteFile(s.usagePath(), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(orphan, []byte("half a write"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := put(s, "c", "1"); err != nil {
			t.Errorf("record %q: a write that fits: %v", bad, err)
		}
		if got, want := recorded(t, s), (usage{Keys: 3, Bytes: 3 * 4096}); got != want {
			t.Errorf("record %q: usage %+v, want %+v", bad, got, want)
		}
		if _, err := os.Stat(orphan); bad != "" && !os.IsNotExist(err) {
			t.Errorf("record %q: the orphan temporary file was kept", bad)
		}
		if ok, err := s.MemoryDelete("c"); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
}

// TestMemoryUsageTwoStores: two stores on one dir (two bridges) writing,
// overwriting and deleting at once keep one exact count, and neither can
// pass the key cap.
func TestMemoryUsageTwoStores(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{New(dir, 1<<20, 64<<20, WithMaxKeys(150)), New(dir, 1<<20, 64<<20, WithMaxKeys(150))}
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused, kept := 0, 0
	for w := 0; w < 4; w++ {
		s := stores[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				key := fmt.Sprintf("w%d-%d", w, i)
				err := put(s, key, `"`+strings.Repeat("v", i*100)+`"`)
				if err != nil {
					if !strings.Contains(err.Error(), "MCP_BRIDGE_MEMORY_MAX_KEYS") {
						t.Error(err)
					}
					mu.Lock()
					refused++
					mu.Unlock()
					continue
				}
				deleted := false
				if i%3 == 0 {
					if deleted, err = s.MemoryDelete(key); err != nil || !deleted {
						t.Error(deleted, err)
					}
				}
				mu.Lock()
				if !deleted {
					kept++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	disk := onDisk(t, stores[0])
	if got := recorded(t, stores[1]); got != disk {
		t.Errorf("usage record %+v, disk %+v", got, disk)
	}
	// 4×60 writes, a third deleted: 160 would be kept without the cap.
	if disk.Keys != kept || disk.Keys > 150 || refused == 0 {
		t.Errorf("%d keys on disk, %d kept and %d refused; want as many kept, at most 150, and some refused", disk.Keys, kept, refused)
	}
}

// TestMemoryListPages: memory_list answers in pages within the budget,
// each at least one entry, that together list every key once, in order.
func TestMemoryListPages(t *testing.T) {
	s := New(t.TempDir(), 4096, 1<<20, WithListBytes(1000))
	var want []string
	for i := 0; i < 40; i++ {
		key := fmt.Sprintf("key%02d", i)
		want = append(want, key)
		meta := json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)
		if i == 7 {
			meta = json.RawMessage(`{"big":"` + strings.Repeat("m", 2000) + `"}`) // over the budget alone
		}
		if _, err := s.MemoryPut(protocol.MemoryPutParams{Key: key, Value: json.RawMessage("1"), Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after, pages := "", 0
	for {
		page, err := s.MemoryList(protocol.MemoryListParams{After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		data, _ := json.Marshal(page)
		if len(page.Memories) == 0 || (len(page.Memories) > 1 && len(data) > 1000) {
			t.Errorf("page after %q: %d entries, %d bytes", after, len(page.Memories), len(data))
		}
		for _, m := range page.Memories {
			got = append(got, m.Key)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages < 5 {
		t.Errorf("%d pages listed %v, want %v", pages, got, want)
	}
}
