package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// storeResult finds the line `RESULT <json>` a store test's code prints and
// decodes it into v; notes around it (saved tools loaded, limits) are left
// alone.
var storeResult = regexp.MustCompile(`(?m)^RESULT (.*)$`)

func decodeStoreResult(r *mcp.CallToolResult, v any) error {
	if r.IsError || len(r.Content) == 0 {
		return fmt.Errorf("call failed: %+v", r.Content)
	}
	tc, _ := r.Content[0].(mcp.TextContent)
	m := storeResult.FindStringSubmatch(tc.Text)
	if m == nil {
		return fmt.Errorf("no RESULT line in %q", tail(tc.Text, 2000))
	}
	return json.Unmarshal([]byte(m[1]), v)
}

// storeWorker is one session's share of the concurrent writes: 60 memories
// (every 5th deleted, every 5th from the 2nd rewritten), 20 increments of
// the shared counter and three saved tools, all named after the worker.
const storeWorker = `W = %q
for i in range(60):
    save_memory('%%s-%%d' %% (W, i), {'w': W, 'i': i, 'pad': 'x' * (i * 97)})
for i in range(0, 60, 5):
    delete_memory('%%s-%%d' %% (W, i))
for i in range(1, 60, 5):
    save_memory('%%s-%%d' %% (W, i), {'w': W, 'i': i, 'again': True})
for _ in range(20):
    update_memory('shared', lambda v: (v or 0) + 1)
%s
import json
print('RESULT ' + json.dumps('done'))
`

// storeFill saves new keys until the key cap refuses one.
const storeFill = `W = %q
import json
n, err = 0, ''
for i in range(500):
    try:
        save_memory('%%s-fill-%%d' %% (W, i), i)
        n += 1
    except Exception as e:
        err = str(e)
        break
print('RESULT ' + json.dumps({'saved': n, 'error': err}))
`

// storeCheck reads everything back in a fresh session.
const storeCheck = `import json, user_tools
keys = [m['key'] for m in list_memories()]
tools = sorted(n for n in vars(user_tools) if n.startswith('add_'))
print('RESULT ' + json.dumps({'keys': keys, 'values': {k: load_memory(k) for k in keys},
      'tools': tools, 'sums': [getattr(user_tools, n)(2, 3) for n in tools]}))
`

// TestStoreTwoBridgesStress: two bridges on one state dir, two sessions
// each, write, rewrite and delete memories, race on one counter with
// update_memory, and save tools, all at once. Afterwards nothing is lost or
// corrupted, the usage record equals the files on disk, and filling the
// store from all four sessions at once stops at exactly the key cap.
func TestStoreTwoBridgesStress(t *testing.T) {
	requirePodman(t)
	const maxKeys = 250
	// The read-back prints every value (about 700 KB): the output cap is raised to hold it.
	env := map[string]string{"MCP_BRIDGE_STATE_DIR": t.TempDir(), "MCP_BRIDGE_MEMORY_MAX_KEYS": fmt.Sprint(maxKeys),
		"MCP_BRIDGE_MAX_OUTPUT_BYTES": "4194304"}
	bridges := []*bridge{startBridge(t, env), startBridge(t, env)}
	workers := []string{"b0s0", "b0s1", "b1s0", "b1s1"}
	// runAll runs code(w) in every worker's session at once.
	runAll := func(code func(w string) string, v func(w string) any) {
		var wg sync.WaitGroup
		errs := make([]error, len(workers))
		for i, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := bridges[i/2].callArgsWithin(150*time.Second, map[string]any{"code": code(w), "session": w, "timeout": 120})
				if err == nil {
					err = decodeStoreResult(r, v(w))
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: %v", workers[i], err)
			}
		}
	}

	start := time.Now()
	runAll(func(w string) string {
		var tools strings.Builder
		for j := 0; j < 3; j++ {
			fmt.Fprintf(&tools, "def add_%s_%d(a, b):\n    return a + b\n_ = save_tool(add_%s_%d)\n", w, j, w, j)
		}
		return fmt.Sprintf(storeWorker, w, tools.String())
	}, func(string) any { return new(string) })
	t.Logf("concurrent writes: %v", time.Since(start).Round(time.Millisecond))

	var got struct {
		Keys   []string                   `json:"keys"`
		Values map[string]json.RawMessage `json:"values"`
		Tools  []string                   `json:"tools"`
		Sums   []int                      `json:"sums"`
	}
	if err := decodeStoreResult(bridges[1].call(map[string]any{"code": storeCheck, "session": "check", "timeout": 120}), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shared": fmt.Sprint(20 * len(workers))}
	var wantTools []string
	for _, w := range workers {
		for i := 0; i < 60; i++ {
			switch {
			case i%5 == 0:
			case i%5 == 1:
				want[fmt.Sprintf("%s-%d", w, i)] = fmt.Sprintf(`{"w": %q, "i": %d, "again": true}`, w, i)
			default:
				want[fmt.Sprintf("%s-%d", w, i)] = fmt.Sprintf(`{"w": %q, "i": %d, "pad": %q}`, w, i, strings.Repeat("x", i*97))
			}
		}
		for j := 0; j < 3; j++ {
			wantTools = append(wantTools, fmt.Sprintf("add_%s_%d", w, j))
		}
	}
	wantKeys := make([]string, 0, len(want))
	for k := range want {
		wantKeys = append(wantKeys, k)
	}
	sort.Strings(wantKeys)
	sort.Strings(wantTools)
	if strings.Join(got.Keys, ",") != strings.Join(wantKeys, ",") {
		t.Errorf("list_memories():\n got %v\nwant %v", got.Keys, wantKeys)
	}
	for k, v := range want {
		var g, w any
		if err := json.Unmarshal(got.Values[k], &g); err != nil || json.Unmarshal([]byte(v), &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("load_memory(%q) = %.200s, want %.200s", k, got.Values[k], v)
		}
	}
	if strings.Join(got.Tools, ",") != strings.Join(wantTools, ",") || len(got.Sums) != len(wantTools) {
		t.Errorf("saved tools: got %v (sums %v), want %v", got.Tools, got.Sums, wantTools)
	}
	for i, s := range got.Sums {
		if s != 5 {
			t.Errorf("%s(2, 3) = %d, want 5", got.Tools[i], s)
		}
	}
	memDir := filepath.Join(env["MCP_BRIDGE_STATE_DIR"], ".bridge", "memory")
	checkUsage(t, memDir, len(want))

	// Fill to the key cap from all four sessions at once: exactly the
	// free room is saved, and every session is told why it stopped.
	fills := map[string]*struct {
		Saved int    `json:"saved"`
		Error string `json:"error"`
	}{}
	var mu sync.Mutex
	runAll(func(w string) string { return fmt.Sprintf(storeFill, w) }, func(w string) any {
		mu.Lock()
		defer mu.Unlock()
		fills[w] = &struct {
			Saved int    `json:"saved"`
			Error string `json:"error"`
		}{}
		return fills[w]
	})
	saved := 0
	for w, f := range fills {
		saved += f.Saved
		if want := fmt.Sprintf("Memory store is full: it holds %d keys, the limit (MCP_BRIDGE_MEMORY_MAX_KEYS)", maxKeys); !strings.Contains(f.Error, want) {
			t.Errorf("%s stopped with %q, want %q", w, f.Error, want)
		}
	}
	if saved != maxKeys-len(want) {
		t.Errorf("the sessions saved %d keys into a store with room for %d", saved, maxKeys-len(want))
	}
	checkUsage(t, memDir, maxKeys)
}

// checkUsage compares the store's usage record with the memory files: the
// key count is keys, and the bytes are each file's size in whole 4 KiB
// blocks.
func checkUsage(t *testing.T, memDir string, keys int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(memDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		bytes += (fi.Size() + 4095) / 4096 * 4096
	}
	data, err := os.ReadFile(filepath.Join(memDir, ".usage"))
	if err != nil {
		t.Fatal(err)
	}
	var u struct {
		Keys  int   `json:"keys"`
		Bytes int64 `json:"bytes"`
	}
	if err := json.Unmarshal(data, &u); err != nil {
		t.Fatalf(".usage %q: %v", data, err)
	}
	if len(files) != keys || u.Keys != keys || u.Bytes != bytes {
		t.Errorf("%d memory files of %d bytes in blocks; the usage record says %+v; want %d keys", len(files), bytes, u, keys)
	}
	if tmp, _ := filepath.Glob(filepath.Join(memDir, ".tmp-*")); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}
