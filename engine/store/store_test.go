package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bridge-mcp/bridge/protocol"
)

func kindOf(err error) string {
	var se *protocol.StoreError
	if errors.As(err, &se) {
		return se.Kind
	}
	return ""
}

func rev(s string) *string { return &s }

// TestMemoryRoundTrip checks put, get, list, delete, created_at kept on
// overwrite, metadata kept by KeepMetadata, and 0600 files.
func TestMemoryRoundTrip(t *testing.T) {
	s := New(t.TempDir(), 1<<20, 8<<20)
	if rec, err := s.MemoryGet("a"); err != nil || rec.Found {
		t.Fatalf("MemoryGet(absent) = %+v, %v", rec, err)
	}
	first, err := s.MemoryPut(protocol.MemoryPutParams{Key: "a", Value: json.RawMessage(`{"x": [1, 2]}`), Metadata: json.RawMessage(`{"tag":"t"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MemoryPut(protocol.MemoryPutParams{Key: "b.c-d_e", Value: json.RawMessage(`"v"`)}); err != nil {
		t.Fatal(err)
	}
	second, err := s.MemoryPut(protocol.MemoryPutParams{Key: "a", Value: json.RawMessage(`3`), KeepMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if second.CreatedAt != first.CreatedAt || second.Rev == first.Rev {
		t.Errorf("overwrite: created %v → %v, rev %s → %s", first.CreatedAt, second.CreatedAt, first.Rev, second.Rev)
	}
	rec, err := s.MemoryGet("a")
	if err != nil || !rec.Found || string(rec.Value) != "3" || string(rec.Metadata) != `{"tag":"t"}` || rec.Rev != second.Rev {
		t.Errorf("MemoryGet(a) = %+v, %v", rec, err)
	}
	list, err := s.MemoryList(protocol.MemoryListParams{})
	if err != nil || list.Next != "" {
		t.Fatal(list, err)
	}
	var keys []string
	for _, m := range list.Memories {
		keys = append(keys, m.Key)
	}
	if got, want := strings.Join(keys, ","), "a,b.c-d_e"; got != want {
		t.Errorf("MemoryList keys = %s, want %s", got, want)
	}
	fi, err := os.Stat(filepath.Join(s.MemoryDir(), "a.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a.json mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	for _, want := range []bool{true, false} {
		if got, err := s.MemoryDelete("a"); got != want || err != nil {
			t.Errorf("MemoryDelete(a) = %v, %v; want %v", got, err, want)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(s.MemoryDir(), ".tmp-*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// TestMemoryRefusals checks keys, values and caps are refused with a clear
// invalid_arguments error.
func TestMemoryRefusals(t *testing.T) {
	s := New(t.TempDir(), 1024, 4096)
	big := json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)
	cases := []struct {
		name string
		p    protocol.MemoryPutParams
		want string
	}{
		{"path", protocol.MemoryPutParams{Key: "../x", Value: json.RawMessage(`1`)}, "Invalid memory key '../x'"},
		{"empty key", protocol.MemoryPutParams{Key: "", Value: json.RawMessage(`1`)}, "Invalid memory key ''"},
		{"dot key", protocol.MemoryPutParams{Key: ".lock", Value: json.RawMessage(`1`)}, "Invalid memory key '.lock'"},
		{"long key", protocol.MemoryPutParams{Key: strings.Repeat("k", 129), Value: json.RawMessage(`1`)}, "Invalid memory key"},
		{"not json", protocol.MemoryPutParams{Key: "k", Value: json.RawMessage(`NaN`)}, "Memory value for 'k' is not JSON"},
		{"metadata", protocol.MemoryPutParams{Key: "k", Value: json.RawMessage(`1`), Metadata: json.RawMessage(`[1]`)}, "must be a JSON object"},
		{"value cap", protocol.MemoryPutParams{Key: "k", Value: big}, "over the 1024-byte limit (MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.MemoryPut(c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) || kindOf(err) != protocol.KindInvalidArguments {
				t.Errorf("MemoryPut = %v (kind %q), want %q", err, kindOf(err), c.want)
			}
		})
	}
	val := json.RawMessage(`"` + strings.Repeat("x", 900) + `"`)
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = s.MemoryPut(protocol.MemoryPutParams{Key: fmt.Sprintf("k%d", i), Value: val})
	}
	if err == nil || !strings.Contains(err.Error(), "MCP_BRIDGE_MEMORY_MAX_TOTAL_BYTES") {
		t.Errorf("filling the store: %v, want the total cap error", err)
	}
	// Overwriting a key in a full store is still allowed when it fits.
	if _, err := s.MemoryPut(protocol.MemoryPutParams{Key: "k0", Value: json.RawMessage(`1`)}); err != nil {
		t.Errorf("shrinking a value in a full store: %v", err)
	}
}

// TestMemoryConditionalPut checks the compare-and-swap that update_memory
// relies on: a stale rev is a conflict, "" means absent.
func TestMemoryConditionalPut(t *testing.T) {
	s := New(t.TempDir(), 1<<20, 8<<20)
	r1, err := s.MemoryPut(protocol.MemoryPutParams{Key: "c", Value: json.RawMessage(`1`), Rev: rev("")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MemoryPut(protocol.MemoryPutParams{Key: "c", Value: json.RawMessage(`2`), Rev: rev("")}); kindOf(err) != protocol.KindConflict {
		t.Errorf("put with rev \"\" over an existing key: %v, want a conflict", err)
	}
	if _, err := s.MemoryPut(protocol.MemoryPutParams{Key: "c", Value: json.RawMessage(`2`), Rev: rev(r1.Rev)}); err != nil {
		t.Errorf("put with the current rev: %v", err)
	}
	if _, err := s.MemoryPut(protocol.MemoryPutParams{Key: "c", Value: json.RawMessage(`3`), Rev: rev(r1.Rev)}); kindOf(err) != protocol.KindConflict {
		t.Errorf("put with a stale rev: %v, want a conflict", err)
	}
}

// TestMemoryConcurrentIncrements runs read-modify-write loops from two
// stores on one dir (two bridge processes: only the file lock orders them)
// and checks that no increment is lost.
func TestMemoryConcurrentIncrements(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{New(dir, 1<<20, 8<<20), New(dir, 1<<20, 8<<20)}
	const perWorker = 50
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		s := stores[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; {
				rec, err := s.MemoryGet("n")
				if err != nil {
					errs <- err
					return
				}
				n := 0
				if rec.Found {
					_ = json.Unmarshal(rec.Value, &n)
				}
				_, err = s.MemoryPut(protocol.MemoryPutParams{Key: "n", Value: json.RawMessage(fmt.Sprint(n + 1)), Rev: rev(rec.Rev)})
				if kindOf(err) == protocol.KindConflict {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rec, _ := stores[0].MemoryGet("n")
	if got, want := string(rec.Value), fmt.Sprint(4*perWorker); got != want {
		t.Errorf("counter = %s, want %s", got, want)
	}
}

// TestSavedTools checks save, list (with metadata and source), the
// reserved and invalid names, the size cap, a corrupt file reported as a
// problem, and delete.
func TestSavedTools(t *testing.T) {
	s := New(t.TempDir(), 1<<20, 8<<20)
	src := "def double(x):\n    \"\"\"Doubles.\"\"\"\n    return 2 * x\n"
	saved, err := s.SaveTool(protocol.SaveToolParams{Name: "double", Source: src, Doc: "Doubles.", Signature: "(x)"})
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.SHA256) != 64 || saved.SavedAt == 0 {
		t.Errorf("SaveTool = %+v", saved)
	}
	fi, err := os.Stat(filepath.Join(s.ToolsDir(), "double.py"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("double.py: %v, %v; want mode 0600", fi, err)
	}
	for _, c := range []struct{ name, source, want string }{
		{"runtime", "x", "Tool name 'runtime' is reserved by the sandbox (a sandbox global); rename the function"},
		{"mcp_x", "x", "reserved by the sandbox (it starts with 'mcp_')"},
		{"__builtins__", "x", "reserved by the sandbox (it starts with '_')"},
		{"_helper", "x", "reserved by the sandbox (it starts with '_')"},
		{"print", "x", "reserved by the sandbox (a Python builtin)"},
		{"json", "x", "reserved by the sandbox (a standard library module)"},
		{"match", "x", "reserved by the sandbox (a Python keyword)"},
		{"delete_tool", "x", "reserved by the sandbox (a sandbox global)"},
		{"display", "x", "reserved by the sandbox (a sandbox global)"},
		{"a-b", "x", "Invalid tool name"},
		{"big", strings.Repeat("#", MaxToolBytes+1), "over the 262144-byte limit"},
		{"empty", " ", "has no source"},
	} {
		if _, err := s.SaveTool(protocol.SaveToolParams{Name: c.name, Source: c.source}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SaveTool(%s) = %v, want %q", c.name, err, c.want)
		}
	}
	if err := os.WriteFile(filepath.Join(s.ToolsDir(), "broken.py"), []byte("def broken(): pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Saved before its name was reserved: reported, not sent, and kept.
	planted := toolHeader + `{"name":"print"}` + "\ndef print(*a): pass\n"
	if err := os.WriteFile(filepath.Join(s.ToolsDir(), "print.py"), []byte(planted), 0o600); err != nil {
		t.Fatal(err)
	}
	tools, problems, err := s.SavedTools()
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Name != "double" || tools[0].Source != src || tools[0].Doc != "Doubles." || tools[0].Signature != "(x)" {
		t.Errorf("SavedTools = %+v", tools)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "saved tool 'broken'") ||
		problems[1] != "saved tool 'print' not loaded: its name is reserved by the sandbox (a Python builtin); runtime.delete_tool('print')" {
		t.Errorf("problems = %q, want one for broken and one for print", problems)
	}
	if _, err := os.Stat(filepath.Join(s.ToolsDir(), "print.py")); err != nil {
		t.Errorf("print.py was not kept: %v", err)
	}
	for _, want := range []bool{true, false} {
		if got, err := s.DeleteTool("double"); got != want || err != nil {
			t.Errorf("DeleteTool = %v, %v; want %v", got, err, want)
		}
	}
}
