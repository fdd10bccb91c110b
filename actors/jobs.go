package actors

// jobs.go keeps the grant of the calls that started background jobs
// (runtime.start), so a job's requests are served with its starting call's
// scope whenever they come, during a later call or between calls.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// maxJobScopes bounds the starting calls a sandbox keeps scopes for: a
// sandbox that keeps asking cannot grow the host's memory. The oldest is
// forgotten first; its jobs' requests are then refused with a fix.
const maxJobScopes = 64

// jobScopes maps host-issued tokens to the scope of the call each was
// issued in. The sandbox is hostile: it only ever names a token, and a
// token only ever yields the scope the host itself bound to it, so no
// request can reach a server no call of the session granted. Tokens are
// random, per sandbox, and die with it (session end, reset, restart).
type jobScopes struct {
	mu      sync.Mutex
	byToken map[string]Scope
	byCall  map[int64]string
	order   []string // tokens, oldest first
}

// issue returns the token for scope's call, binding a new one the first
// time. The job's scope has no deadline: its tool calls are bounded by the
// tool-call timeout only, since the starting call may be long over.
func (j *jobScopes) issue(scope Scope) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if tok, ok := j.byCall[scope.Call]; ok {
		return tok
	}
	if j.byToken == nil {
		j.byToken, j.byCall = map[string]Scope{}, map[int64]string{}
	}
	if len(j.order) >= maxJobScopes {
		old := j.order[0]
		j.order = j.order[1:]
		delete(j.byCall, j.byToken[old].Call)
		delete(j.byToken, old)
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	tok := hex.EncodeToString(b[:])
	scope.Deadline = time.Time{}
	scope.progress = nil // a job's progress goes to the call active when it comes (jobSink)
	j.byToken[tok] = scope
	j.byCall[scope.Call] = tok
	j.order = append(j.order, tok)
	return tok
}

// lookup is the scope bound to tok.
func (j *jobScopes) lookup(tok string) (Scope, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s, ok := j.byToken[tok]
	return s, ok
}

// jobToken is the job token in a request's meta; "" when it has none.
// The meta is decoded strictly like params: unknown fields are refused.
func jobToken(req *jsonrpc2.Request) (string, error) {
	if req.Meta == nil || bytes.Equal(bytes.TrimSpace(*req.Meta), []byte("null")) {
		return "", nil
	}
	var m protocol.JobMeta
	dec := json.NewDecoder(bytes.NewReader(*req.Meta))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return "", invalidParams(req.Method+" meta", err)
	}
	return m.Job, nil
}

// errUnknownJob refuses a request whose token the host never issued (a
// forged one) or has forgotten.
var errUnknownJob = LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable,
	"Unknown job token: this session never issued it, or forgot it after 64 newer calls started jobs; start the job again with runtime.start")
