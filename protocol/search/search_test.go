package search

// search_test.go is one file over 500 lines on purpose: it is the search
// package's whole behaviour (acceptance queries, ranking, tokenizer, stemmer,
// suggestions), kept beside the tables it shares.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// catalog is the shape of testdata/catalog.json: servers in config order,
// each with its tools in tools/list order.
type catalog struct {
	Servers []struct {
		Name  string `json:"name"`
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	} `json:"servers"`
}

var nonAlias = regexp.MustCompile(`[^a-z0-9_]+`)

// alias is ALS-1 without collision handling, enough for the fixture.
func alias(name, fallback string) string {
	a := nonAlias.ReplaceAllString(strings.ToLower(name), "_")
	if a == "" {
		return fallback
	}
	if a[0] >= '0' && a[0] <= '9' {
		a = "_" + a
	}
	return a
}

func loadCatalog(t testing.TB) []Doc {
	t.Helper()
	raw, err := os.ReadFile("testdata/catalog.json")
	if err != nil {
		t.Fatalf("catalog: %v", err)
	}
	var c catalog
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	var docs []Doc
	for _, s := range c.Servers {
		for _, tool := range s.Tools {
			docs = append(docs, Doc{
				Server:      s.Name,
				ServerAlias: alias(s.Name, "server"),
				Tool:        tool.Name,
				ToolAlias:   alias(tool.Name, "tool"),
				Description: tool.Description,
			})
		}
	}
	return docs
}

// names returns "server.tool" for each hit.
func names(docs []Doc, hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = docs[h.Doc].Server + "." + docs[h.Doc].Tool
	}
	return out
}

func TestAcceptance(t *testing.T) {
	docs := loadCatalog(t)
	if n := len(docs); n < 35 || n > 45 {
		t.Fatalf("fixture has %d tools, want about 40", n)
	}
	ix := NewIndex(docs)
	cases := []struct {
		query  string
		within int      // the first hit among want must be in the top `within`
		want   []string // any of these
	}{
		// SRC-3
		{"read file", 1, []string{"filesystem.read_file", "filesystem.read_text_file"}},
		{"commit history", 1, []string{"git.git_log"}},
		{"rdfile", 3, []string{"filesystem.read_file", "filesystem.read_text_file"}},
		{"sql select", 1, []string{"sqlite.read_query"}},
		{"writ fil", 3, []string{"filesystem.write_file"}},
		// more
		{"list directory", 1, []string{"filesystem.list_directory"}},
		{"knowledge graph", 1, []string{"memory.read_graph"}},
		{"web page url", 1, []string{"fetch.fetch"}},
		{"git status", 1, []string{"git.git_status"}},
		{"create table", 1, []string{"sqlite.create_table"}},
		{"delete relations", 1, []string{"memory.delete_relations"}},
		{"rename file", 1, []string{"filesystem.move_file"}},
		{"staged changes diff", 1, []string{"git.git_diff_staged"}},
		{"image", 1, []string{"filesystem.read_media_file"}},
		{"file metadata", 1, []string{"filesystem.get_file_info"}},
		{"remove entity", 1, []string{"memory.delete_entities"}},
		{"switch branch", 1, []string{"git.git_checkout"}},
		{"gitlog", 1, []string{"git.git_log"}},
		{"crt dir", 3, []string{"filesystem.create_directory"}},
		{"ReadFile", 1, []string{"filesystem.read_file"}},
		{"sqlite.list_tables", 1, []string{"sqlite.list_tables"}},
		// typos of whole words
		{"comit history", 1, []string{"git.git_log"}},
		{"directry listing", 1, []string{"filesystem.list_directory"}},
		{"knowlege grpah", 1, []string{"memory.read_graph"}},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			got := names(docs, ix.Search(tc.query, 5))
			t.Logf("%q → %v", tc.query, got[:min(3, len(got))])
			for _, g := range got[:min(tc.within, len(got))] {
				if slices.Contains(tc.want, g) {
					return
				}
			}
			t.Errorf("Search(%q) = %v, want one of %v in the top %d", tc.query, got, tc.want, tc.within)
		})
	}
}

func TestSearchEmpty(t *testing.T) {
	ix := NewIndex(loadCatalog(t))
	for _, q := range []string{"", "   ", "\t\n"} {
		if got := ix.Search(q, 5); got != nil {
			t.Errorf("Search(%q) = %v, want nil", q, got)
		}
	}
	if got := NewIndex(nil).Search("read file", 5); got != nil {
		t.Errorf("empty index: Search = %v, want nil", got)
	}
	// Nothing matches: no BM25 term, and not a fuzzy subsequence of any name.
	if got := ix.Search("zzzzqqq", 5); got != nil {
		t.Errorf("Search(zzzzqqq) = %v, want nil", got)
	}
}

func TestSearchLimit(t *testing.T) {
	ix := NewIndex(loadCatalog(t))
	all := ix.Search("file", 0)
	if len(all) < 10 {
		t.Fatalf("Search(file, 0) = %d hits, want ≥ 10", len(all))
	}
	for _, limit := range []int{1, 3, 5, 20, len(all), len(all) + 5, -1} {
		got := ix.Search("file", limit)
		want := len(all)
		if limit > 0 {
			want = min(limit, len(all))
		}
		if len(got) != want {
			t.Errorf("Search(file, %d) = %d hits, want %d", limit, len(got), want)
		}
		if !slices.Equal(got, all[:len(got)]) {
			t.Errorf("Search(file, %d) is not a prefix of the unlimited result", limit)
		}
	}
}

func TestSearchOrder(t *testing.T) {
	ix := NewIndex(loadCatalog(t))
	for _, q := range []string{"file", "git", "knowledge graph", "rdfile", "delete"} {
		hits := ix.Search(q, 0)
		for i := 1; i < len(hits); i++ {
			a, b := hits[i-1], hits[i]
			if a.Score < b.Score || (a.Score == b.Score && a.Doc > b.Doc) {
				t.Errorf("Search(%q): hit %d %+v before %+v", q, i, a, b)
			}
			if b.Score <= 0 {
				t.Errorf("Search(%q): hit %+v has no score", q, b)
			}
		}
	}
}

func TestSearchTiesBreakByOrder(t *testing.T) {
	// Identical docs score identically; config order, then tool order, wins.
	docs := []Doc{
		{Server: "a", ServerAlias: "a", Tool: "ping", ToolAlias: "ping", Description: "Check the service"},
		{Server: "b", ServerAlias: "b", Tool: "ping", ToolAlias: "ping", Description: "Check the service"},
		{Server: "c", ServerAlias: "c", Tool: "ping", ToolAlias: "ping", Description: "Check the service"},
	}
	for _, q := range []string{"ping", "service", "png"} {
		hits := NewIndex(docs).Search(q, 0)
		if len(hits) != 3 || hits[0].Doc != 0 || hits[1].Doc != 1 || hits[2].Doc != 2 {
			t.Errorf("Search(%q) = %+v, want docs 0, 1, 2", q, hits)
		}
	}
}

func TestSearchDeterministic(t *testing.T) {
	docs := loadCatalog(t)
	a, b := NewIndex(docs), NewIndex(docs)
	for _, q := range []string{"read file", "commit history", "rdfile", "knowledge graph", "x"} {
		first := a.Search(q, 20)
		if again := a.Search(q, 20); !slices.Equal(first, again) {
			t.Errorf("Search(%q) twice: %v then %v", q, first, again)
		}
		if other := b.Search(q, 20); !slices.Equal(first, other) {
			t.Errorf("Search(%q) on a second index: %v then %v", q, first, other)
		}
	}
}

func TestSearchCopiesDocs(t *testing.T) {
	docs := loadCatalog(t)
	ix := NewIndex(docs)
	want := ix.Search("read file", 5)
	for i := range docs {
		docs[i] = Doc{}
	}
	if got := ix.Search("read file", 5); !slices.Equal(got, want) {
		t.Errorf("after the caller reused its slice: %v, want %v", got, want)
	}
}

func TestSearchConcurrent(t *testing.T) {
	docs := loadCatalog(t)
	ix := NewIndex(docs)
	want := ix.Search("read file", 5)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := ix.Search("read file", 5); !slices.Equal(got, want) {
					t.Errorf("concurrent Search = %v, want %v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSearchNameStyles(t *testing.T) {
	docs := []Doc{
		{Server: "fs", ServerAlias: "fs", Tool: "readFile", ToolAlias: "readfile", Description: "Read a file"},
		{Server: "fs", ServerAlias: "fs", Tool: "write-file", ToolAlias: "write_file", Description: "Write a file"},
		{Server: "fs", ServerAlias: "fs", Tool: "delete_file", ToolAlias: "delete_file", Description: "Delete a file"},
		{Server: "hash", ServerAlias: "hash", Tool: "sha256sum", ToolAlias: "sha256sum", Description: "Checksum a file"},
		{Server: "web", ServerAlias: "web", Tool: "HTTPServer", ToolAlias: "httpserver", Description: "Serve a directory"},
	}
	ix := NewIndex(docs)
	for q, want := range map[string]string{
		"read file":   "readFile",
		"readfile":    "readFile",
		"write file":  "write-file",
		"delete file": "delete_file",
		"sha 256":     "sha256sum",
		"sha256":      "sha256sum",
		"http server": "HTTPServer",
		"wrt":         "write-file",
	} {
		hits := ix.Search(q, 1)
		if len(hits) == 0 || docs[hits[0].Doc].Tool != want {
			t.Errorf("Search(%q) = %v, want %s first", q, names(docs, hits), want)
		}
	}
}

func TestSearchSynthetic(t *testing.T) {
	docs := Synthetic(1000)
	ix := NewIndex(docs)
	for _, q := range []string{"sned dashbaord", "send dashboard", "sendDashboard"} {
		hits := ix.Search(q, 1)
		if len(hits) == 0 {
			t.Errorf("Search(%q): no hits", q)
			continue
		}
		if got := Tokenize(docs[hits[0].Doc].Tool); !slices.Contains(got, "send") || !slices.Contains(got, "dashboard") {
			t.Errorf("Search(%q) = %v, want a send-dashboard tool first", q, names(docs, hits))
		}
	}
}

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"read_file", []string{"read", "file"}},
		{"read-text-file", []string{"read", "text", "file"}},
		{"readFile", []string{"read", "file"}},
		{"HTTPServer", []string{"http", "server"}},
		{"getHTTPResponseCode", []string{"get", "http", "response", "code"}},
		{"sha256sum", []string{"sha", "256", "sum"}},
		{"v2Api", []string{"v", "2", "api"}},
		{"IPv6", []string{"i", "pv", "6"}},
		{"Read the complete contents of a file.", []string{"read", "complete", "contents", "file"}},
		{"server.tool", []string{"server", "tool"}},
		{"  ALL CAPS  ", []string{"all", "caps"}},
		{"the a an of to in for and or on with by is it this that from as be at", nil},
		{"Größe_Ändern", []string{"größe", "ändern"}},
		{"naïve café", []string{"naïve", "café"}},
		{"日本語のテキスト", []string{"日本語のテキスト"}},
		{"x\xffy", []string{"x", "y"}},
		{"[FILE] and [DIR]", []string{"file", "dir"}},
	} {
		if got := Tokenize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStem(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{stem("files"), "fil"},
		{stem("file"), "fil"},
		{stem("fil"), "fil"},
		{stem("write"), "writ"},
		{stem("writ"), "writ"},
		{stem("writing"), "writ"},
		{stem("queries"), "query"},
		{stem("query"), "query"},
		{stem("directories"), "directory"},
		{stem("entities"), "entity"},
		{stem("staged"), "stag"},
		{stem("staging"), "stag"},
		{stem("stage"), "stag"},
		{stem("logs"), "log"},
		{stem("status"), "status"},
		{stem("access"), "access"},
		{stem("analysis"), "analysis"},
		{stem("branches"), "branch"},
		{stem("running"), "run"},
		{stem("filling"), "fill"},
		{stem("string"), "string"},
		{stem("modified"), "modify"},
		{stem("tree"), "tree"},
		{stem("256"), "256"},
		{stem("größe"), "größe"},
	} {
		if tc.got != tc.want {
			t.Errorf("stem = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	var fsTools []string
	for _, d := range loadCatalog(t) {
		if d.Server == "filesystem" {
			fsTools = append(fsTools, d.Tool)
		}
	}
	for _, tc := range []struct {
		name       string
		candidates []string
		n          int
		first      string // "" means want nil
	}{
		{"reed_file", fsTools, 3, "read_file"},
		{"read_fiel", fsTools, 3, "read_file"},
		{"READ_FILE", fsTools, 3, "read_file"},
		{"rdfile", fsTools, 3, "read_file"},
		{"list_dir", fsTools, 3, "list_directory"},
		{"writefile", fsTools, 3, "write_file"},
		{"dir_tree", fsTools, 3, "directory_tree"},
		{"reed_file", nil, 3, ""},
		{"reed_file", []string{}, 3, ""},
		{"reed_file", fsTools, 0, ""},
		{"", fsTools, 3, ""},
		{"zzzzzz", fsTools, 3, ""},
	} {
		got := Suggest(tc.name, tc.candidates, tc.n)
		if tc.first == "" {
			if got != nil {
				t.Errorf("Suggest(%q, %d) = %q, want nil", tc.name, tc.n, got)
			}
			continue
		}
		if len(got) == 0 || got[0] != tc.first || len(got) > tc.n {
			t.Errorf("Suggest(%q, %d) = %q, want %q first and at most %d", tc.name, tc.n, got, tc.first, tc.n)
		}
	}
	if got := Suggest("read", []string{"read", "read", "reads"}, 5); !slices.Equal(got, []string{"read", "reads"}) {
		t.Errorf("Suggest with duplicates = %q", got)
	}
	long := strings.Repeat("a", 1000)
	_ = Suggest(long, []string{long, "a"}, 3) // bounded work, no panic
}

func TestOSA(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"abc", "abc", 0},
		{"reed_file", "read_file", 1}, {"read_fiel", "read_file", 1},
		{"kitten", "sitting", 3}, {"ca", "abc", 3},
	} {
		if got := osa([]rune(tc.a), []rune(tc.b)); got != tc.want {
			t.Errorf("osa(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSynthetic(t *testing.T) {
	a, b := Synthetic(1000), Synthetic(1000)
	if len(a) != 1000 || !slices.Equal(a, b) {
		t.Fatalf("Synthetic(1000): %d docs, deterministic %v", len(a), slices.Equal(a, b))
	}
	seen := map[string]bool{}
	lastServer := ""
	servers := 0
	for _, d := range a {
		if d.Server != lastServer {
			if seen["server "+d.Server] {
				t.Fatalf("server %s is not contiguous", d.Server)
			}
			seen["server "+d.Server] = true
			lastServer = d.Server
			servers++
		}
		key := d.Server + "." + d.Tool
		if seen[key] {
			t.Errorf("duplicate tool %s", key)
		}
		seen[key] = true
		if d.Tool == "" || d.Description == "" || d.ToolAlias == "" || d.ServerAlias == "" {
			t.Errorf("incomplete doc %+v", d)
		}
	}
	if servers != 25 {
		t.Errorf("%d servers, want 25", servers)
	}
	if got := Synthetic(0); got != nil {
		t.Errorf("Synthetic(0) = %v", got)
	}
	if got := Synthetic(3); len(got) != 3 {
		t.Errorf("Synthetic(3) = %d docs", len(got))
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"", "read_file", "readFile", "HTTPServer", "sha256sum", "list-directory-with-sizes",
		"Read the complete contents of a file.", "Größe", "x\xffy", "ǅemal", "aAϒb", "İstanbul",
		"Ⅻⅻⓐ", "a\u0301b", "\u0301x", "12abc34DEF",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokenize(s)
		for _, tok := range toks {
			if tok == "" {
				t.Fatalf("Tokenize(%q) has an empty token: %q", s, toks)
			}
			for _, r := range tok {
				if unicode.ToLower(r) != r {
					t.Fatalf("Tokenize(%q) has a token that is not lower-case: %q", s, tok)
				}
			}
			if stopwords[tok] {
				t.Fatalf("Tokenize(%q) kept the stopword %q", s, tok)
			}
		}
		if again := Tokenize(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("Tokenize is not idempotent on %q: %q then %q", s, toks, again)
		}
		_ = terms(s) // stemming must not panic either
	})
}

func FuzzSearch(f *testing.F) {
	docs := loadCatalog(f)
	ix := NewIndex(docs)
	for _, s := range []string{"read file", "rdfile", "commit history", "\x00", "a\x00b", "  ", "ǅ", "x\xffy"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, q string, limit int) {
		hits := ix.Search(q, limit)
		if limit > 0 && len(hits) > limit {
			t.Fatalf("Search(%q, %d) = %d hits", q, limit, len(hits))
		}
		for i, h := range hits {
			if h.Doc < 0 || h.Doc >= len(docs) || !(h.Score > 0) || math.IsInf(h.Score, 0) {
				t.Fatalf("Search(%q): bad hit %+v", q, h)
			}
			if i > 0 && (hits[i-1].Score < h.Score || (hits[i-1].Score == h.Score && hits[i-1].Doc >= h.Doc)) {
				t.Fatalf("Search(%q): out of order at %d: %+v", q, i, hits)
			}
		}
		_ = Suggest(q, []string{"read_file", "write_file", q}, 3)
	})
}

// BenchmarkSearch1000 measures one search over the 1,000-tool synthetic
// catalog (SPEC §18: p50 ≤ 5 ms). It reports the median as p50-ns besides
// the mean ns/op.
func BenchmarkSearch1000(b *testing.B) {
	ix := NewIndex(Synthetic(1000))
	queries := []string{
		"read file", "list pull requests", "delete bucket object", "create issue comment",
		"commit history", "sned dashbaord", "k8s pod logs", "query database table",
		"upload document", "approve merge request", "getUserById", "metric alert dashboard",
	}
	var durations []time.Duration
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		if hits := ix.Search(queries[i%len(queries)], 5); len(hits) == 0 && i < len(queries) {
			b.Logf("no hits for %q", queries[i%len(queries)])
		}
		durations = append(durations, time.Since(start))
		i++
	}
	sort.Slice(durations, func(a, c int) bool { return durations[a] < durations[c] })
	if len(durations) > 0 {
		b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
	}
}

func ExampleIndex_Search() {
	ix := NewIndex([]Doc{
		{Server: "git", ServerAlias: "git", Tool: "git_commit", ToolAlias: "git_commit", Description: "Records changes to the repository"},
		{Server: "git", ServerAlias: "git", Tool: "git_log", ToolAlias: "git_log", Description: "Shows the commit logs"},
	})
	for _, h := range ix.Search("commit history", 5) {
		fmt.Println(h.Doc)
	}
	// Output:
	// 1
	// 0
}
