package actors

// inputstate.go is the table of requestState handles a 2026-07-28 client
// gets with an input_required result. A handle names one question of one
// held run_python call; the client echoes it on its retry, which answers
// the question and re-attaches to the call. Handles are random, bound to
// the principal, the MCP session and the call's arguments, used once, and
// expire with the wait for the answer (MCP_BRIDGE_APPROVAL_TIMEOUT).

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The caps of the table: a call that keeps asking, or a principal that
// starts gated calls and never retries them, cannot grow it without bound.
const (
	// MaxInputRounds bounds the input_required rounds of one run_python call.
	MaxInputRounds = 32
	// MaxHeldInputs bounds the requestStates outstanding in the bridge.
	MaxHeldInputs = 64
	// MaxHeldInputsPerPrincipal bounds those of one principal.
	MaxHeldInputsPerPrincipal = 16
	// maxSpent bounds the used and expired handles remembered, so a late
	// retry is told which it was rather than "unknown".
	maxSpent = 1024
)

// inputBinding is what a requestState is bound to: the principal and MCP
// session of the request that received it, and the call's arguments
// (code, servers, session, timeout), which a retry must repeat.
type inputBinding struct {
	principal, mcpSession string
	args                  [sha256.Size]byte
}

// bindingOf binds a call of principal on mcpSession with raw arguments;
// the arguments are compared as JSON values, not bytes, so a client that
// re-encodes them with its keys in another order still matches.
func bindingOf(principal, mcpSession string, raw json.RawMessage) inputBinding {
	b := inputBinding{principal: principal, mcpSession: mcpSession}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		if canon, err := json.Marshal(v); err == nil {
			raw = canon
		}
	}
	b.args = sha256.Sum256(raw)
	return b
}

// heldInput is one outstanding handle: the held call and its question.
type heldInput struct {
	bind  inputBinding
	call  *heldCall
	q     *question
	timer *time.Timer
}

type spentInput struct {
	principal string
	expired   bool
}

// inputStates is the table. The zero value is not usable: newInputStates.
type inputStates struct {
	mu           sync.Mutex
	live         map[string]*heldInput
	perPrincipal map[string]int
	spent        map[string]spentInput
	spentOrder   []string
	closed       bool
	// max and maxPer are MaxHeldInputs and MaxHeldInputsPerPrincipal;
	// fields so a unit test can use small ones.
	max, maxPer int
}

func newInputStates() *inputStates {
	return &inputStates{
		live: map[string]*heldInput{}, perPrincipal: map[string]int{}, spent: map[string]spentInput{},
		max: MaxHeldInputs, maxPer: MaxHeldInputsPerPrincipal,
	}
}

// errInputStateUnknown is the answer to a handle the table never issued to
// the caller: made up, another principal's, or from before a restart.
var errInputStateUnknown = errors.New("requestState is unknown (another client's, made up, or from before the bridge restarted); call run_python again without requestState")

// issue mints a handle for q of call, bound to bind, live for ttl; when it
// expires unanswered, expire runs (outside the table's lock).
func (t *inputStates) issue(bind inputBinding, call *heldCall, q *question, ttl time.Duration, expire func()) (string, error) {
	var raw [32]byte // 256 random bits
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("requestState: %w", err)
	}
	state := base64.RawURLEncoding.EncodeToString(raw[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return "", errors.New("the bridge is shutting down")
	case len(t.live) >= t.max:
		return "", fmt.Errorf("%d run_python calls already wait for a client's input_required answer (the bridge's cap); answer those first", t.max)
	case t.perPrincipal[bind.principal] >= t.maxPer:
		return "", fmt.Errorf("%d of this client's run_python calls already wait for its input_required answer (the cap per principal); answer those first", t.maxPer)
	}
	h := &heldInput{bind: bind, call: call, q: q}
	h.timer = time.AfterFunc(ttl, func() {
		if t.expire(state, h) {
			expire()
		}
	})
	t.live[state] = h
	t.perPrincipal[bind.principal]++
	return state, nil
}

// expire drops state if h still holds it; false when a retry took it first.
func (t *inputStates) expire(state string, h *heldInput) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live[state] != h {
		return false
	}
	t.dropLocked(state, h, true)
	return true
}

func (t *inputStates) dropLocked(state string, h *heldInput, expired bool) {
	delete(t.live, state)
	if t.perPrincipal[h.bind.principal]--; t.perPrincipal[h.bind.principal] <= 0 {
		delete(t.perPrincipal, h.bind.principal)
	}
	if len(t.spentOrder) >= maxSpent {
		delete(t.spent, t.spentOrder[0])
		t.spentOrder = t.spentOrder[1:]
	}
	t.spent[state] = spentInput{principal: h.bind.principal, expired: expired}
	t.spentOrder = append(t.spentOrder, state)
}

// take redeems state for a retry bound to bind: once, and only by the
// principal, MCP session and arguments it was issued for. A retry that
// does not match leaves the handle to the client it belongs to.
func (t *inputStates) take(state string, bind inputBinding, ttl time.Duration) (*heldInput, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.live[state]
	if !ok {
		sp, was := t.spent[state]
		switch {
		case !was || sp.principal != bind.principal:
			return nil, errInputStateUnknown
		case sp.expired:
			return nil, fmt.Errorf("requestState expired: no retry came within %ds (MCP_BRIDGE_APPROVAL_TIMEOUT), so its run_python call was interrupted; run it again", int(ttl/time.Second))
		default:
			return nil, errors.New("requestState was already used: each input_required round is answered once; retry with the newest requestState")
		}
	}
	switch {
	case h.bind.principal != bind.principal:
		return nil, errInputStateUnknown
	case h.bind.mcpSession != bind.mcpSession:
		return nil, errors.New("requestState belongs to another MCP session: retry on the connection that received it")
	case h.bind.args != bind.args:
		return nil, errors.New("requestState belongs to another run_python call: retry with the same arguments (code, servers, session, timeout) as the call that returned it")
	}
	h.timer.Stop()
	t.dropLocked(state, h, false)
	return h, nil
}

// close drops every handle and refuses new ones; the calls they held are
// the front's to stop.
func (t *inputStates) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for state, h := range t.live {
		h.timer.Stop()
		t.dropLocked(state, h, true)
	}
}

// outstanding is the number of live handles.
func (t *inputStates) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}
