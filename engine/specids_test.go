package engine

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// specIndex is the page that says what each cited requirement ID asks for.
const specIndex = "docs/spec-ids.md"

// citedRe matches a requirement ID as comments cite it: TMO-4, or a range
// such as LNK-1..6.
var citedRe = regexp.MustCompile(`\b([A-Z]{2,5})-([0-9]+)(?:\.\.([0-9]+))?\b`)

// notIDs are prefixes that read like an ID but name something else
// (SHA-256, UTF-8, CVE-2024-…, and SEP-1699: an MCP proposal, not ours).
var notIDs = map[string]bool{"SHA": true, "UTF": true, "AES": true, "CVE": true, "RFC": true, "ISO": true, "SEP": true}

// indexLineRe is one line of the index table: | `TMO-4` | what it requires |.
var indexLineRe = regexp.MustCompile("^\\| `([A-Z]{2,5}-[0-9]+)` \\| (.+) \\|$")

// citedIDs returns the requirement IDs line cites, a range expanded.
func citedIDs(line string) []string {
	var out []string
	for _, m := range citedRe.FindAllStringSubmatch(line, -1) {
		if notIDs[m[1]] {
			continue
		}
		from, _ := strconv.Atoi(m[2])
		to := from
		if m[3] != "" {
			to, _ = strconv.Atoi(m[3])
		}
		for n := from; n <= to && n < from+20; n++ {
			out = append(out, m[1]+"-"+strconv.Itoa(n))
		}
	}
	return out
}

func TestCitedIDs(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"// bounded (TMO-4); see SES-6.", []string{"TMO-4", "SES-6"}},
		{"// SPEC §7 LNK-1..3, CLN-2/CLN-3", []string{"LNK-1", "LNK-2", "LNK-3", "CLN-2", "CLN-3"}},
		{"// the SHA-256 of a UTF-8 text, CVE-2024-1234", nil},
		{"// VAL-* and §8.3 and x-1 and ABCDEF-1", nil},
	} {
		if got := citedIDs(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("citedIDs(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestSpecIDsIndexed checks that every requirement ID a .go, .py or .md file
// of the repository (or the image's Containerfile) cites has its line in
// docs/spec-ids.md, so a reader can look every citation up.
func TestSpecIDsIndexed(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	index := readIndex(t, filepath.Join(root, specIndex))
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		ext := filepath.Ext(name)
		if filepath.ToSlash(rel) == specIndex || (ext != ".go" && ext != ".py" && ext != ".md" && name != "Containerfile") {
			return nil
		}
		files++
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for n := 1; sc.Scan(); n++ {
			for _, id := range citedIDs(sc.Text()) {
				if !index[id] {
					t.Errorf("%s:%d cites %s, which %s does not list: add its line there (or, if it is not a requirement ID, its prefix to notIDs)", rel, n, id, specIndex)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files under %s; the walk did not find the repository", files, root)
	}
}

// readIndex returns the IDs the index lists, and fails on a malformed line:
// an ID listed twice, or a line without its meaning.
func readIndex(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("spec index: %v", err)
	}
	ids := map[string]bool{}
	for n, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := indexLineRe.FindStringSubmatch(line)
		switch {
		case m == nil:
			t.Errorf("%s:%d: want | `ID` | what it requires |, got %q", specIndex, n+1, line)
		case ids[m[1]]:
			t.Errorf("%s:%d: %s is listed twice", specIndex, n+1, m[1])
		case len(strings.TrimSpace(m[2])) < 20:
			t.Errorf("%s:%d: %s has no real meaning: %q", specIndex, n+1, m[1], m[2])
		default:
			ids[m[1]] = true
		}
	}
	if len(ids) == 0 {
		t.Fatalf("%s lists no IDs", specIndex)
	}
	return ids
}
