package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"time"
)

// Record kinds.
const (
	KindCall       = "call"
	KindCheckpoint = "checkpoint"
)

// Record is one line of the audit trail: a run_python call, or the
// checkpoint that opens a file. Field order is the encoding's: "seq" and
// "prev" must stay last (readTail reads them from a line's end).
type Record struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`

	Principal string   `json:"principal,omitempty"`
	Client    string   `json:"client,omitempty"`
	Session   string   `json:"session,omitempty"`
	Call      int64    `json:"call,omitempty"`
	CodeSHA   string   `json:"code_sha256,omitempty"`
	Code      *string  `json:"code,omitempty"`
	Servers   []string `json:"servers,omitempty"`
	Timeout   int      `json:"timeout_s,omitempty"`
	Inner     []Inner  `json:"inner,omitempty"`
	Approvals []Ask    `json:"approvals,omitempty"`
	Status    string   `json:"status,omitempty"`
	ExitCode  *int     `json:"exit_code,omitempty"`
	OutBytes  int      `json:"output_bytes,omitempty"`
	DurMs     int64    `json:"duration_ms,omitempty"`

	// Before is a checkpoint's count of the records before it.
	Before int64 `json:"before,omitempty"`

	Seq  int64  `json:"seq"`
	Prev string `json:"prev"`
}

// Inner is one request the call's code made of the host: a tool call, a
// resource, memory or search request.
type Inner struct {
	Method  string `json:"method"`
	Server  string `json:"server,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Args    *Value `json:"args,omitempty"`
	Result  *Value `json:"result,omitempty"`
	Outcome string `json:"outcome"` // "ok", or the error's message
	// Code and Kind are an error's JSON-RPC code and the bridge's kind
	// (denied, timeout, …), so a replay raises the same exception.
	Code  int64  `json:"code,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Bytes int    `json:"bytes"` // of the result
	Ms    int64  `json:"duration_ms"`
}

// Ask is one approval: the question, the decision and who decided.
type Ask struct {
	Server   string `json:"server"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"`
	Decider  string `json:"decider,omitempty"`
}

// Value is a stored value: its JSON when it fits MaxValueBytes, and always
// its SHA-256 and size, so that a value over the cap can still be matched.
type Value struct {
	JSON   json.RawMessage `json:"json,omitempty"`
	SHA256 string          `json:"sha256"`
	Bytes  int             `json:"bytes"`
}

// MaxValueBytes caps each stored value.
const MaxValueBytes = 64 << 10

// NewValue stores raw (JSON), redacted first by r.
func NewValue(raw json.RawMessage, r *Redactor) *Value {
	if len(raw) == 0 {
		return nil
	}
	red := r.JSON(raw)
	d := sha256.Sum256(red)
	v := &Value{SHA256: hex.EncodeToString(d[:]), Bytes: len(red)}
	if len(red) <= MaxValueBytes {
		v.JSON = red
	}
	return v
}

// Digest is the hex SHA-256 of s.
func Digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// Redacted replaces what a Redactor removes.
const Redacted = "[redacted]"

// secretSuffixes end the object keys whose values are secrets, compared
// lowercased with '-', '_' and '.' removed: "github_token", "X-Api-Key",
// "client_secret", but not "max_tokens" or "author".
var secretSuffixes = []string{"token", "password", "passwd", "passphrase", "secret", "apikey", "cookie", "credential",
	"credentials", "privatekey", "signature", "sessionid", "authorization", "auth"}

// secretKey reports whether the value of object key k is a secret.
func secretKey(k string) bool {
	k = strings.ToLower(strings.NewReplacer("-", "", "_", "", ".", "").Replace(k))
	for _, s := range secretSuffixes {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return false
}

// Redactor removes secrets from stored values: the values of keys that look
// like secrets, bearer credentials written into text, and every word that
// is one of the bridge's own secrets (its tokens, which it holds only as
// digests: known answers for a word).
type Redactor struct {
	known func(word string) bool
}

// NewRedactor redacts the words known reports (nil: none) besides
// secret-looking keys and bearer credentials.
func NewRedactor(known func(word string) bool) *Redactor {
	return &Redactor{known: known}
}

// JSON is raw with secrets redacted; raw that is not JSON is stored as a
// redacted string.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		b, _ := json.Marshal(r.String(string(raw)))
		return b
	}
	out, err := json.Marshal(r.value(v))
	if err != nil {
		return json.RawMessage(`null`)
	}
	return out
}

func (r *Redactor) value(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if secretKey(k) {
				if _, nested := x.(map[string]any); !nested {
					t[k] = Redacted
					continue
				}
			}
			t[k] = r.value(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = r.value(x)
		}
		return t
	case string:
		return r.String(t)
	}
	return v
}

// String is s with the bridge's secrets, and bearer credentials, replaced.
func (r *Redactor) String(s string) string {
	if r != nil && r.known != nil {
		s = word.ReplaceAllStringFunc(s, func(w string) string {
			if r.known(w) {
				return Redacted
			}
			return w
		})
	}
	return bearer.ReplaceAllString(s, "${1}"+Redacted)
}

// word matches what could be a token: 16 or more token characters.
var word = regexp.MustCompile(`[A-Za-z0-9._~+/=-]{16,}`)

// bearer matches an Authorization credential written into text.
var bearer = regexp.MustCompile(`(?i)\b(bearer\s+|basic\s+)[A-Za-z0-9._~+/=-]{8,}`)
