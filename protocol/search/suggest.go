package search

import (
	"cmp"
	"slices"
	"strings"

	"github.com/sahilm/fuzzy"
)

// maxSuggestRunes bounds the names whose edit distance Suggest computes,
// keeping it O(maxSuggestRunes²) per candidate on hostile input.
const maxSuggestRunes = 128

// minSimilarity is the least similarity (1 − distance / longer length) the
// fallback accepts, so that unrelated names are never suggested.
const minSimilarity = 0.5

// Suggest returns up to n names from candidates closest to name
// (sahilm/fuzzy, then a similarity fallback), best first; used for "Did you
// mean" messages (PRX-4).
//
// Candidates fall into three tiers, compared case-insensitively:
//  1. typos: at most typoLimit(name) edits away (optimal string alignment,
//     so a transposition is one edit), fewest edits first. A typo such as
//     "reed_file" is not a fuzzy subsequence of "read_file", and a looser
//     fuzzy match ("read_media_file") must not outrank it;
//  2. sahilm/fuzzy matches (abbreviations such as "rdfile"), by fuzzy score;
//  3. the fallback: similarity ≥ minSimilarity, most similar first.
//
// Within a tier, and between equals, candidates keep their input order.
// Duplicates are reported once. It returns nil when n ≤ 0, name is empty or
// nothing qualifies.
func Suggest(name string, candidates []string, n int) []string {
	if n <= 0 || name == "" || len(candidates) == 0 {
		return nil
	}
	var uniq []string
	seen := map[string]bool{}
	for _, c := range candidates {
		if !seen[c] {
			seen[c] = true
			uniq = append(uniq, c)
		}
	}
	fz := map[int]int{}
	for _, m := range fuzzy.FindNoSort(name, uniq) {
		fz[m.Index] = m.Score
	}

	type ranked struct {
		pos, tier, dist, fuzzy int
		sim                    float64
	}
	lname := []rune(strings.ToLower(name))
	limit := typoLimit(len(lname))
	var rs []ranked
	for i, c := range uniq {
		r := ranked{pos: i, dist: -1}
		lc := []rune(strings.ToLower(c))
		if len(lname) <= maxSuggestRunes && len(lc) <= maxSuggestRunes {
			r.dist = osa(lname, lc)
			r.sim = 1 - float64(r.dist)/float64(max(len(lname), len(lc)))
		}
		score, isFuzzy := fz[i]
		r.fuzzy = score
		switch {
		case r.dist >= 0 && r.dist <= limit:
			r.tier = 0
		case isFuzzy:
			r.tier = 1
		case r.dist >= 0 && r.sim >= minSimilarity:
			r.tier = 2
		default:
			continue
		}
		rs = append(rs, r)
	}
	slices.SortStableFunc(rs, func(x, y ranked) int {
		if c := cmp.Compare(x.tier, y.tier); c != 0 {
			return c
		}
		switch x.tier {
		case 0:
			return cmp.Compare(x.dist, y.dist)
		case 1:
			return cmp.Compare(y.fuzzy, x.fuzzy)
		default:
			return cmp.Compare(y.sim, x.sim)
		}
	})
	var out []string
	for _, r := range rs[:min(n, len(rs))] {
		out = append(out, uniq[r.pos])
	}
	return out
}

// typoLimit is how many edits still count as a typo of a name of n runes:
// 1 up to 4 runes, 2 up to 8, then 3.
func typoLimit(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	default:
		return 3
	}
}

// osa is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and adjacent transpositions each cost 1.
func osa(a, b []rune) int {
	// Three rolling rows: before previous, previous, current.
	pp := make([]int, len(b)+1)
	p := make([]int, len(b)+1)
	c := make([]int, len(b)+1)
	for j := range p {
		p[j] = j
	}
	for i := 1; i <= len(a); i++ {
		c[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			c[j] = min(p[j]+1, c[j-1]+1, p[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				c[j] = min(c[j], pp[j-2]+1)
			}
		}
		pp, p, c = p, c, pp
	}
	return p[len(b)]
}
