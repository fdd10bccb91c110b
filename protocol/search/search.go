// Package search ranks the tools of every discovered server for
// runtime.search_tool_docs (SPEC §9.5, SRC-1) and suggests close names for
// "Did you mean" messages (PRX-4).
//
// Ranking is BM25F: for a query term t and a doc d, the per-field term
// frequencies are length-normalised per field, weighted (tool name 3, server
// name 2, description 1) and summed into one pseudo-frequency
//
//	tf~(t,d) = Σ_f w_f · tf_f(t,d) / (1 − b + b · len_f(d) / avglen_f)
//
// which is saturated once: score(t,d) = idf(t) · tf~ / (k1 + tf~), with
// k1 = 1.2, b = 0.75 and idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)), df
// counting docs that hold t in any field. Saturating after the fields are
// combined (rather than summing three separately saturated BM25 scores)
// keeps a term repeated across fields from scoring as if it were three
// independent terms. Tokens are Tokenize's, lightly stemmed.
//
// Query terms are expanded before scoring, at reduced weight: a term in a
// small synonym group also searches the group ("history" → log), and a term
// the index lacks searches the indexed terms one or two edits away ("sned"
// → send).
//
// A sahilm/fuzzy bonus on top catches typos and abbreviations ("rdfile" →
// read_file): the query, with its spaces and punctuation removed, is matched
// against every "tool" and "server.tool" string.
package search

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/sahilm/fuzzy"
)

// Ranking constants (SRC-1).
const (
	bm25K1 = 1.2
	bm25B  = 0.75

	weightTool   = 3.0
	weightServer = 2.0
	weightDesc   = 1.0

	// synonymWeight scales a term that the query did not contain but that a
	// query term's synonym group added. It is below 1, so a literal match
	// always outranks the same match through a synonym.
	synonymWeight = 0.5

	// typoWeight scales an indexed term that stands in for a query term the
	// index lacks, one or two edits away ("sned" → send). Below 1 for the
	// same reason as synonymWeight.
	typoWeight = 0.5
	// maxTypoRunes and maxTypoTerms bound the work of typo expansion on a
	// hostile query: longer terms, and unknown terms past the first
	// maxTypoTerms, are not expanded.
	maxTypoRunes = 32
	maxTypoTerms = 8

	// fuzzyShare is the bonus of the best fuzzy match, as a share of the best
	// BM25 score of the query (or 1 when no doc has a BM25 score).
	fuzzyShare = 0.5
	// fuzzyHalving is how many sahilm/fuzzy points below the best fuzzy
	// match halve the bonus. 20 is the library's bonus for one character
	// matched right after a separator.
	fuzzyHalving = 20.0
)

// The fields of a doc, in the order of fieldWeights.
const (
	fieldTool = iota
	fieldServer
	fieldDesc
	numFields
)

var fieldWeights = [numFields]float64{
	fieldTool:   weightTool,
	fieldServer: weightServer,
	fieldDesc:   weightDesc,
}

// synonymGroups are small sets of words that tool descriptions and users
// use interchangeably. A query term in a group also searches the group's
// other members at synonymWeight. Keep it short: each entry must be a
// common, unambiguous equivalence, not a fix for one query.
var synonymGroups = [][]string{
	{"history", "log"},
	{"delete", "remove"},
	{"directory", "folder"},
	{"search", "find"},
	{"internet", "web"},
	{"rename", "move"},
}

// synonyms maps a stem to the stems of the other members of its groups.
var synonyms = func() map[string][]string {
	m := map[string][]string{}
	for _, g := range synonymGroups {
		for _, w := range g {
			sw := stem(w)
			for _, o := range g {
				if o != w {
					m[sw] = append(m[sw], stem(o))
				}
			}
		}
	}
	return m
}()

// Doc is one searchable tool.
type Doc struct {
	Server, ServerAlias, Tool, ToolAlias, Description string
}

// Hit is one result: the position of the doc in NewIndex's slice and its score.
type Hit struct {
	Doc   int
	Score float64
}

// posting is one doc holding a term, with the term's full BM25F
// contribution for that doc precomputed (it does not depend on the query).
type posting struct {
	doc   int32
	score float64
}

// Index is an immutable BM25 index over docs, safe for concurrent use.
//
// Invariants: nothing is written after NewIndex returns; every postings list
// is in ascending doc order; tools[i] and qualified[i] describe docs[i].
type Index struct {
	docs      []Doc
	postings  map[string][]posting
	vocab     [][]rune // the keys of postings, sorted, for typo expansion
	tools     []string // Tool of each doc, the fuzzy target
	qualified []string // Server + "." + Tool of each doc, the other fuzzy target
}

// NewIndex indexes docs, which must be in config order, then each server's
// tool order: ties in Search break by position in this slice. The slice is
// copied, so the caller may reuse it.
func NewIndex(docs []Doc) *Index {
	n := len(docs)
	ix := &Index{
		docs:      slices.Clone(docs),
		postings:  map[string][]posting{},
		tools:     make([]string, n),
		qualified: make([]string, n),
	}
	type freqs = [numFields]int
	perDoc := make([]map[string]*freqs, n)
	lens := make([][numFields]int, n)
	var total [numFields]float64
	df := map[string]int{}
	for i, d := range ix.docs {
		ix.tools[i] = d.Tool
		ix.qualified[i] = d.Server + "." + d.Tool
		fields := [numFields][]string{
			fieldTool:   withAlias(terms(d.Tool), d.ToolAlias),
			fieldServer: withAlias(terms(d.Server), d.ServerAlias),
			fieldDesc:   terms(d.Description),
		}
		tf := map[string]*freqs{}
		for f, ts := range fields {
			lens[i][f] = len(ts)
			total[f] += float64(len(ts))
			for _, t := range ts {
				c := tf[t]
				if c == nil {
					c = new(freqs)
					tf[t] = c
					df[t]++
				}
				c[f]++
			}
		}
		perDoc[i] = tf
	}
	var avg [numFields]float64
	for f := range avg {
		if n > 0 {
			avg[f] = total[f] / float64(n)
		}
	}
	for i, tf := range perDoc {
		var norm [numFields]float64
		for f := range norm {
			norm[f] = 1
			if avg[f] > 0 {
				norm[f] = 1 - bm25B + bm25B*float64(lens[i][f])/avg[f]
			}
		}
		for t, c := range tf {
			var pseudo float64
			for f := range numFields {
				pseudo += fieldWeights[f] * float64(c[f]) / norm[f]
			}
			idf := math.Log(1 + (float64(n-df[t])+0.5)/(float64(df[t])+0.5))
			ix.postings[t] = append(ix.postings[t], posting{
				doc:   int32(i),
				score: idf * pseudo / (bm25K1 + pseudo),
			})
		}
	}
	// perDoc was walked in doc order, so each list is already ascending.
	for _, t := range slices.Sorted(maps.Keys(ix.postings)) {
		ix.vocab = append(ix.vocab, []rune(t))
	}
	return ix
}

// withAlias appends the alias's terms that ts lacks. An alias is usually the
// name lower-cased with punctuation replaced by "_", so it mostly adds
// nothing; for "readFile" it adds "readfile", the form a user may type.
func withAlias(ts []string, alias string) []string {
	for _, t := range terms(alias) {
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// queryTerm is one distinct stemmed query term and its weight.
type queryTerm struct {
	term   string
	weight float64
}

// queryTerms returns the distinct stems of query, in order of first
// appearance and at weight 1; then the synonyms they add, at synonymWeight;
// then, for each of the first maxTypoTerms stems the index lacks, the
// indexed terms within typoLimit (at most 2) edits, at typoWeight, in
// vocabulary order. A term appears once, at the first (and so highest)
// weight that reached it.
func (ix *Index) queryTerms(query string) []queryTerm {
	var qs []queryTerm
	seen := map[string]bool{}
	add := func(t string, w float64) {
		if !seen[t] {
			seen[t] = true
			qs = append(qs, queryTerm{t, w})
		}
	}
	literal := terms(query)
	for _, t := range literal {
		add(t, 1)
	}
	for _, t := range literal {
		for _, s := range synonyms[t] {
			add(s, synonymWeight)
		}
	}
	unknown := 0
	for _, t := range literal {
		if _, ok := ix.postings[t]; ok || unknown == maxTypoTerms {
			continue
		}
		unknown++
		for _, v := range ix.typos(t) {
			add(v, typoWeight)
		}
	}
	return qs
}

// typos returns the indexed terms within typoLimit edits of t, a term the
// index lacks. Terms under four letters are left alone: too many short
// words are one edit apart.
func (ix *Index) typos(t string) []string {
	rt := []rune(t)
	if len(rt) < 4 || len(rt) > maxTypoRunes {
		return nil
	}
	limit := min(typoLimit(len(rt)), 2)
	var out []string
	for _, v := range ix.vocab {
		if d := len(v) - len(rt); d > limit || -d > limit {
			continue
		}
		if osa(rt, v) <= limit {
			out = append(out, string(v))
		}
	}
	return out
}

// fuzzyPattern is the query with everything but letters and digits removed,
// so "writ fil" becomes "writfil" and still matches "write_file".
func fuzzyPattern(query string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return r
		}
		return -1
	}, query)
}

// Search returns up to limit hits for query, best first; limit ≤ 0 means
// no limit. Only docs that match some query term or the fuzzy pattern are
// returned. Equal scores keep NewIndex's order (config order, then tool
// order). An empty or blank query returns nil. The result is a pure
// function of the index and the arguments.
func (ix *Index) Search(query string, limit int) []Hit {
	if strings.TrimSpace(query) == "" || len(ix.docs) == 0 {
		return nil
	}
	scores := make([]float64, len(ix.docs))
	var best float64
	for _, q := range ix.queryTerms(query) {
		for _, p := range ix.postings[q.term] {
			scores[p.doc] += q.weight * p.score
		}
	}
	for _, s := range scores {
		best = max(best, s)
	}
	ix.addFuzzy(scores, fuzzyPattern(query), best)

	var hits []Hit
	for i, s := range scores {
		if s > 0 {
			hits = append(hits, Hit{Doc: i, Score: s})
		}
	}
	slices.SortFunc(hits, func(x, y Hit) int {
		if c := cmp.Compare(y.Score, x.Score); c != 0 {
			return c
		}
		return cmp.Compare(x.Doc, y.Doc)
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit:limit]
	}
	return hits
}

// addFuzzy adds the sahilm/fuzzy bonus to scores. A doc's fuzzy score is the
// better of its "tool" and "server.tool" matches; the best-matching doc gets
// fuzzyShare·max(bestBM25, 1), and the bonus halves for every fuzzyHalving
// points a doc scores below it. Docs the pattern does not match get nothing.
func (ix *Index) addFuzzy(scores []float64, pattern string, bestBM25 float64) {
	if pattern == "" {
		return
	}
	fz := make([]int, len(ix.docs))
	matched := make([]bool, len(ix.docs))
	top, found := math.MinInt, false
	for _, targets := range [][]string{ix.tools, ix.qualified} {
		for _, m := range fuzzy.FindNoSort(pattern, targets) {
			if !matched[m.Index] || m.Score > fz[m.Index] {
				fz[m.Index] = m.Score
			}
			matched[m.Index] = true
			top, found = max(top, m.Score), true
		}
	}
	if !found {
		return
	}
	scale := fuzzyShare * max(bestBM25, 1)
	for i, ok := range matched {
		if ok {
			scores[i] += scale * math.Exp2(float64(fz[i]-top)/fuzzyHalving)
		}
	}
}
