package search

import (
	"strings"
	"unicode"
)

// stopwords are dropped by Tokenize. The list is deliberately small: words
// this common carry no signal in a tool name or a one-line description.
var stopwords = map[string]bool{
	"the": true, "a": true, "an": true, "of": true, "to": true, "in": true,
	"for": true, "and": true, "or": true, "on": true, "with": true, "by": true,
	"is": true, "it": true, "this": true, "that": true, "from": true, "as": true,
	"be": true, "at": true,
}

// runeClass is what Tokenize needs to know about a rune.
type runeClass uint8

const (
	classSep    runeClass = iota // ends the current token and is dropped
	classLetter                  // part of a word
	classDigit                   // part of a number
	classMark                    // continues the current token, if any
)

func classify(r rune) runeClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classDigit
	case unicode.IsMark(r):
		return classMark
	default:
		return classSep
	}
}

// isUpper reports whether r changes when lower-cased. Defining "upper" this
// way, rather than by unicode.IsUpper, guarantees that Tokenize's own output
// has no upper-case runes left, so it never splits that output again at a
// camelCase boundary (the idempotence FuzzTokenize checks).
func isUpper(r rune) bool { return unicode.ToLower(r) != r }

// Tokenize splits s into lower-case search tokens. It splits at every rune
// that is not a letter, number or combining mark; at camelCase boundaries
// ("readFile" → read, file; "HTTPServer" → http, server); and where letters
// meet digits ("sha256sum" → sha, 256, sum). Stopwords are dropped.
//
// Invariants: every token is non-empty and already lower-case, and
// Tokenize(strings.Join(Tokenize(s), " ")) equals Tokenize(s). Tokenize does
// not stem; stemming is internal to the index.
func Tokenize(s string) []string {
	var out []string
	var cur []rune // the current token, original case, start is a letter or digit
	var curClass runeClass
	flush := func() {
		if len(cur) == 0 {
			return
		}
		for i, r := range cur {
			cur[i] = unicode.ToLower(r)
		}
		if t := string(cur); !stopwords[t] {
			out = append(out, t)
		}
		cur = cur[:0]
	}
	rs := []rune(s)
	for i, r := range rs {
		c := classify(r)
		switch c {
		case classSep:
			flush()
			continue
		case classMark:
			if len(cur) > 0 {
				cur = append(cur, r)
			}
			continue
		}
		if len(cur) > 0 {
			prev := cur[len(cur)-1]
			switch {
			case c != curClass:
				// letter/digit boundary
				flush()
			case c == classLetter && isUpper(r) && unicode.IsLower(prev):
				// camelCase: "readFile" splits before F
				flush()
			case c == classLetter && isUpper(r) && isUpper(prev) &&
				i+1 < len(rs) && unicode.IsLower(rs[i+1]):
				// acronym then word: "HTTPServer" splits before S
				flush()
			}
		}
		if len(cur) == 0 {
			curClass = c
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// stem reduces a token to a light, deterministic stem so that inflections
// meet: files/file → fil, queries → query, staged/staging/stage → stag,
// write/writ → writ. It only touches all-ASCII lower-case words of four or
// more letters, and never leaves fewer than three letters. It is applied to
// both the index and the query, so it need not produce real words.
func stem(t string) string {
	if len(t) < 4 {
		return t
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 'a' || t[i] > 'z' {
			return t
		}
	}
	// plural
	switch {
	case strings.HasSuffix(t, "ies") && len(t) > 4:
		t = t[:len(t)-3] + "y"
	case strings.HasSuffix(t, "sses"):
		t = t[:len(t)-2]
	case strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "ss") &&
		!strings.HasSuffix(t, "us") && !strings.HasSuffix(t, "is"):
		t = t[:len(t)-1]
	}
	// -ing, -ed
	switch {
	case strings.HasSuffix(t, "ing") && len(t)-3 >= 3 && hasVowel(t[:len(t)-3]):
		t = undouble(t[:len(t)-3])
	case strings.HasSuffix(t, "ied") && len(t) > 4:
		t = t[:len(t)-3] + "y"
	case strings.HasSuffix(t, "ed") && len(t)-2 >= 3 && hasVowel(t[:len(t)-2]):
		t = undouble(t[:len(t)-2])
	}
	// silent e, so that "write" meets "writing" and "file" meets "filed"
	if len(t) >= 4 && t[len(t)-1] == 'e' && t[len(t)-2] != 'e' {
		t = t[:len(t)-1]
	}
	return t
}

func hasVowel(s string) bool { return strings.ContainsAny(s, "aeiouy") }

// undouble turns a doubled final consonant into one ("embedd" → "embed",
// "runn" → "run"), except for l, s and z ("fill", "pass", "buzz"), and only
// when at least three letters remain.
func undouble(t string) string {
	n := len(t)
	if n < 4 || t[n-1] != t[n-2] || strings.IndexByte("aeioulsz", t[n-1]) >= 0 {
		return t
	}
	return t[:n-1]
}

// terms returns the stemmed tokens of s, in order, with repeats.
func terms(s string) []string {
	toks := Tokenize(s)
	for i, t := range toks {
		toks[i] = stem(t)
	}
	return toks
}
