// Package httpd is the HTTP side of bridge serve: bearer-token
// authentication from a tokens file, the middleware in front of mcp-go's
// streamable HTTP server (body cap, Origin check, session binding, access
// log), TLS certificates re-read on change, and the Prometheus metrics. It
// knows nothing of sessions or sandboxes: the engine gives it the MCP
// handler and reads the principal from the request context.
package httpd

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/bridge-mcp/bridge/engine/fileperm"
)

// principalRe is what a principal may be: the same alphabet as a session
// name, so (principal, session) keys and per-principal directories need
// no escaping.
var principalRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ValidPrincipal reports whether name may be a principal. "." and ".."
// match the alphabet but would name a directory's self or parent in the
// per-principal store, so they are refused.
func ValidPrincipal(name string) bool {
	return principalRe.MatchString(name) && name != "." && name != ".."
}

// TokenSet maps token digests to principals. Tokens are kept only as
// SHA-256 digests: a lookup compares fixed-size digests in constant time,
// so neither a token's length nor its prefix leaks through timing.
type TokenSet struct {
	entries []tokenEntry
	// Short names the principals whose token is under MinTokenLength
	// characters: accepted, and named by bridge doctor.
	Short []string
}

// MinTokenLength is the shortest token bridge doctor does not warn about:
// 32 characters of `openssl rand -hex 16` carry 128 bits.
const MinTokenLength = 32

type tokenEntry struct {
	digest    [sha256.Size]byte
	principal string
}

// Len is the number of tokens.
func (t *TokenSet) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Principals lists the principals, in file order, each once.
func (t *TokenSet) Principals() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range t.entries {
		if !seen[e.principal] {
			seen[e.principal] = true
			out = append(out, e.principal)
		}
	}
	return out
}

// Lookup returns the principal of token. Every entry is compared, whether
// or not an earlier one matched, so the time taken does not tell which
// entry (if any) matched.
func (t *TokenSet) Lookup(token string) (string, bool) {
	if t == nil || token == "" {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	found := ""
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found = e.principal
		}
	}
	return found, found != ""
}

// ParseTokens parses a tokens file: one "principal token" per line, blank
// lines and "#" comments allowed. An error names the line at fault and
// never quotes a token.
func ParseTokens(data []byte) (*TokenSet, error) {
	set := &TokenSet{}
	owner := map[[sha256.Size]byte]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 1 && strings.ContainsAny(fields[0], ":=,;"):
			// "alice:abc" is a principal and a token with the wrong
			// separator, not a bad principal name.
			return nil, fmt.Errorf("tokens: line %d: want \"principal token\" separated by a space, not %q (e.g. alice abc)", n, fields[0][strings.IndexAny(fields[0], ":=,;")])
		case !ValidPrincipal(fields[0]):
			return nil, fmt.Errorf("tokens: line %d: principal must be 1-64 characters from A-Z a-z 0-9 _ . - (not . or ..)", n)
		case len(fields) == 1:
			return nil, fmt.Errorf("tokens: line %d: principal %s has an empty token; write \"principal token\"", n, fields[0])
		case len(fields) > 2:
			return nil, fmt.Errorf("tokens: line %d: want \"principal token\", got %d fields (a token has no spaces)", n, len(fields))
		}
		d := sha256.Sum256([]byte(fields[1]))
		if prev, dup := owner[d]; dup {
			if prev == fields[0] {
				return nil, fmt.Errorf("tokens: line %d: principal %s lists the same token twice", n, prev)
			}
			return nil, fmt.Errorf("tokens: line %d: the token of %s is also given to %s; each token names one principal", n, fields[0], prev)
		}
		owner[d] = fields[0]
		set.entries = append(set.entries, tokenEntry{digest: d, principal: fields[0]})
		if len(fields[1]) < MinTokenLength {
			set.Short = append(set.Short, fields[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	if len(set.entries) == 0 {
		return nil, ErrNoTokens
	}
	return set, nil
}

// ErrNoTokens is ParseTokens' error for a file that lists no token: empty,
// or blank lines and comments only.
var ErrNoTokens = errors.New("tokens: the file lists no tokens; write one \"principal token\" per line")

// LoadTokens reads and parses path; others is true when the file's mode
// lets anyone but its owner read it (fileperm.Foreign: group read counts
// as the owner's when the group is the process's own gid, as for a
// Kubernetes Secret mounted 0440 with fsGroup). A missing file or
// one that lists no tokens is an error made with Revoke: at start-up it
// is an error like any other, but a Reloaded that meets it while serving
// revokes every token (an operator empties or deletes the file to do so),
// where a malformed file keeps the previous set.
func LoadTokens(path string) (set *TokenSet, others bool, err error) {
	readErr := func(err error) error {
		err = fmt.Errorf("tokens: %w", err)
		if errors.Is(err, fs.ErrNotExist) {
			return Revoke(err)
		}
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, false, readErr(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, readErr(err)
	}
	set, err = ParseTokens(data)
	if errors.Is(err, ErrNoTokens) {
		err = Revoke(err)
	}
	return set, fileperm.Foreign(st)&0o044 != 0, err
}
