package actors

// relay.go passes an upstream server's questions (elicitation/create,
// sampling/createMessage) to the human behind the inner call that caused
// them. One server process serves every session, and on stdio nothing ties
// such a request to a tools/call: a question is relayed only when exactly
// one call is in flight on the connection, or when it names its task
// (related-task). Anything else is declined, and the calls in flight get a
// note saying why.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// UpstreamCaps is the capability set the bridge declares to the servers it
// proxies: what its MCP client declared (elicitation, form and URL modes;
// sampling), never more. After Expect it is not known until Set (the
// client's initialize): until then, for at most capsWait, a server start
// waits for it, since a server lists different tools to different sets.
type UpstreamCaps struct {
	mu        sync.Mutex
	set       bool
	caps      HumanCaps
	ready     chan struct{}
	waitUntil time.Time // zero: nothing to wait for
}

// capsWait bounds how long a server start waits for the client's
// initialize: past it, the server is started declaring nothing.
const capsWait = 2 * time.Second

// NewUpstreamCaps returns the empty set, known (see Expect).
func NewUpstreamCaps() *UpstreamCaps {
	return &UpstreamCaps{ready: make(chan struct{})}
}

// Expect makes the set unknown until Set, for at most capsWait from now.
func (u *UpstreamCaps) Expect() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.set {
		u.waitUntil = time.Now().Add(capsWait)
	}
}

// Set records the client's capabilities; the first Set wins, since servers
// already started declared it.
func (u *UpstreamCaps) Set(c HumanCaps) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.set {
		return
	}
	u.set, u.caps = true, HumanCaps{Form: c.Form, URL: c.URL, Sampling: c.Sampling}
	close(u.ready)
}

// get is the set, waiting (within capsWait of its making, and ctx) for it
// to be known; unknown is the empty set. A nil set is empty.
func (u *UpstreamCaps) get(ctx context.Context) HumanCaps {
	if u == nil {
		return HumanCaps{}
	}
	u.mu.Lock()
	set, until := u.set, u.waitUntil
	u.mu.Unlock()
	if set || until.IsZero() {
		return u.known()
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-u.ready:
	case <-t.C:
	case <-ctx.Done():
	}
	return u.known()
}

func (u *UpstreamCaps) known() HumanCaps {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.caps
}

// key names the set in the disk catalog's key: "" when empty, so catalogs
// written before capabilities were declared stay valid for that set.
func (c HumanCaps) key() string {
	var parts []string
	if c.Form {
		parts = append(parts, "ef")
	}
	if c.URL {
		parts = append(parts, "eu")
	}
	if c.Sampling {
		parts = append(parts, "s")
	}
	if len(parts) == 0 {
		return ""
	}
	return "-" + strings.Join(parts, "")
}

// declared is the set as initialize declares it.
func (c HumanCaps) declared() mcp.ClientCapabilities {
	var out mcp.ClientCapabilities
	if c.Form || c.URL {
		out.Elicitation = &mcp.ElicitationCapability{}
		if c.Form {
			out.Elicitation.Form = &struct{}{}
		}
		if c.URL {
			out.Elicitation.URL = &struct{}{}
		}
	}
	if c.Sampling {
		out.Sampling = &mcp.SamplingCapability{}
	}
	return out
}

// CapsOf is what a client's declared capabilities let the bridge ask.
func CapsOf(caps mcp.ClientCapabilities) HumanCaps {
	var c HumanCaps
	if e := caps.Elicitation; e != nil {
		// An empty elicitation object means form mode only (2025-11-25).
		c.Form = e.Form != nil || e.URL == nil
		c.URL = e.URL != nil
	}
	c.Sampling = caps.Sampling != nil
	if !c.Form {
		c.Missing = noElicitation
	}
	return c
}

// capsStore keys a catalog store by config hash and declared capability
// set: a server lists different tools to different sets.
type capsStore struct {
	inner CatalogStore
	caps  *UpstreamCaps
}

// CapsStore returns store keyed also by caps.
func CapsStore(store CatalogStore, caps *UpstreamCaps) CatalogStore {
	return capsStore{store, caps}
}

func (s capsStore) Load(hash string) (ServerCatalog, bool) {
	return s.inner.Load(hash + s.caps.get(context.Background()).key())
}

func (s capsStore) Save(hash string, c ServerCatalog) {
	s.inner.Save(hash+s.caps.get(context.Background()).key(), c)
}

// innerCall is one tools/call in flight on a connection: the upstream
// requests attributed to it go to the human of src.
type innerCall struct {
	server, tool string
	ctx          context.Context // ends with the inner call
	src          humanSource     // nil: no one to ask
}

type innerKey struct{}

// withInner marks ctx as the context of an inner call of src.
func withInner(ctx context.Context, server, tool string, src humanSource) context.Context {
	return context.WithValue(ctx, innerKey{}, &innerCall{server: server, tool: tool, src: src})
}

func innerFrom(ctx context.Context) *innerCall {
	ic, _ := ctx.Value(innerKey{}).(*innerCall)
	return ic
}

// note adds msg to the notes of the run_python call the inner call belongs
// to, if one is active.
func (ic *innerCall) note(msg string) {
	if ic != nil && ic.src != nil {
		ic.src.note(msg)
	}
}

// innerCalls is a connection's tools/calls in flight, and the upstream
// tasks bound to them.
type inflightCalls struct {
	mu    sync.Mutex
	calls map[*innerCall]struct{}
	tasks map[string]*innerCall
}

// add registers ic (a fresh one when nil, so the count stays true) for the
// length of its call; done unregisters it.
func (f *inflightCalls) add(ic *innerCall) (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[*innerCall]struct{}{}
	}
	f.calls[ic] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.calls, ic)
	}
}

// track registers the request of ctx (an inner call, withInner; else one
// named server and what) for the questions the server may ask while it
// runs under cctx, its bounded context; the returned context carries the
// entry (for BindTask and RelayInput), and done unregisters it.
func (s *serverConn) track(ctx, cctx context.Context, server, what string) (context.Context, func()) {
	ic := innerCall{server: server, tool: what}
	if from := innerFrom(ctx); from != nil {
		ic = *from
	}
	ic.ctx = cctx
	return context.WithValue(cctx, innerKey{}, &ic), s.calls.add(&ic)
}

// BindTask ties the upstream requests that name taskID (related-task) to
// the inner call of ctx, until unbind is called: for a task-augmented call,
// whose questions come while other calls are in flight.
func (s *serverConn) BindTask(ctx context.Context, taskID string) (unbind func()) {
	ic := innerFrom(ctx)
	f := &s.calls
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tasks == nil {
		f.tasks = map[string]*innerCall{}
	}
	f.tasks[taskID] = ic
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.tasks[taskID] == ic {
			delete(f.tasks, taskID)
		}
	}
}

// attribute is the call a request belongs to: its task's, else the only
// call in flight; nil and every call in flight when there is no single one.
func (f *inflightCalls) attribute(taskID string) (*innerCall, []*innerCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ic, ok := f.tasks[taskID]; ok && taskID != "" && ic != nil {
		return ic, nil
	}
	all := make([]*innerCall, 0, len(f.calls))
	for ic := range f.calls {
		all = append(all, ic)
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return nil, all
}

// relatedTask is the task id in a request's _meta, "" when none.
func relatedTask(params any) string {
	raw, err := json.Marshal(params)
	if err != nil {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	var rt struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(p.Meta[mcp.RelatedTaskMetaKey], &rt)
	return rt.TaskID
}

// httpRelayBound keeps a relay under mcp-go's HTTP client limit: it gives
// a server→client request 30 s, after which the answer cannot be sent.
const httpRelayBound = 29 * time.Second

// handleRequest answers a server→client request on the connection: ping,
// and the questions the client's capabilities allow; -32601 for the rest.
// It runs on a goroutine of the transport's. A panic ends the connection,
// and the server still gets an answer (-32603).
func (s *serverConn) handleRequest(ctx context.Context, req transport.JSONRPCRequest) (resp *transport.JSONRPCResponse, err error) {
	defer guard(s.log, "a request from the server", func(any) {
		s.abort()
		resp, err = transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, "internal error", nil), nil
	})
	s.panicAt.at("relay")
	switch req.Method {
	case string(mcp.MethodPing):
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	case string(mcp.MethodElicitationCreate):
		return s.relay(ctx, req, "elicitation", s.declared.Form || s.declared.URL, s.relayElicitationRaw)
	case string(mcp.MethodSamplingCreateMessage):
		return s.relay(ctx, req, "sampling", s.declared.Sampling, s.relaySampling)
	}
	return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "method not supported: "+printable.Log(req.Method), nil), nil
}

type relayFunc func(ctx context.Context, ic *innerCall, asks *approvals, params json.RawMessage) (any, string, error)

// relay attributes req to an inner call, asks its human through f, and
// answers the server; the notes say what could not be relayed.
func (s *serverConn) relay(ctx context.Context, req transport.JSONRPCRequest, what string, declared bool, f relayFunc) (*transport.JSONRPCResponse, error) {
	ic, all := s.calls.attribute(relatedTask(req.Params))
	if !declared {
		msg := fmt.Sprintf("Server '%s' sent a %s request, which your MCP client did not declare; the server got an error (-32601)", s.name, what)
		noteAll(ic, all, msg)
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, what+" is not supported by this client", nil), nil
	}
	if ic == nil {
		noteAll(nil, all, fmt.Sprintf("Server '%s' asked for input (%s) while %d calls to it were in flight, so the bridge could not tell which call it came from; it was declined", s.name, what, len(all)))
		return declined(req.ID, what)
	}
	raw, _ := json.Marshal(req.Params)
	// The transport's context may carry a limit of its own (mcp-go's HTTP
	// client: 30 s, which relayBound stays under); the connection's life
	// bounds the relay instead.
	base := s.life
	if base == nil {
		base = context.WithoutCancel(ctx)
	}
	res, err := ic.ask(base, s.relayBound, what, func(ctx context.Context, asks *approvals) (any, string, error) {
		return f(ctx, ic, asks, raw)
	})
	if ref := (*relayRefusal)(nil); errors.As(err, &ref) {
		return transport.NewJSONRPCErrorResponse(req.ID, ref.code, ref.msg, nil), nil
	}
	if err != nil {
		return declined(req.ID, what)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return transport.NewJSONRPCResultResponse(req.ID, out), nil
}

// relayRefusal is a question the bridge does not put to the human at
// all: the server gets an error with code and msg (one line, saying why),
// not the decline that stands for a human's answer or absence.
type relayRefusal struct {
	code int
	msg  string
}

func (r *relayRefusal) Error() string { return r.msg }

// errNotAsked is why a question had no answer when no client could be asked.
var errNotAsked = errors.New("no client could be asked")

// ask puts a question of the inner call ic to its human through f, within
// bound (<= 0: DefaultApprovalTimeout) and the life of base and of the
// call; the wait is not the cell's time. The error is non-nil when there
// was no answer: no human, a refusal (*relayRefusal), or a failure, each
// noted on the call's result.
func (ic *innerCall) ask(base context.Context, bound time.Duration, what string, f func(context.Context, *approvals) (any, string, error)) (any, error) {
	var asks *approvals
	if ic.src != nil {
		asks = ic.src.current()
	}
	if asks == nil || asks.human == nil {
		ic.note(fmt.Sprintf("%s.%s asked for input (%s), and no client could be asked; it was declined", ic.server, ic.tool, what))
		return nil, errNotAsked
	}
	if bound <= 0 {
		bound = DefaultApprovalTimeout
	}
	ctx, cancel := context.WithTimeout(base, bound)
	defer cancel()
	if ic.ctx != nil {
		stop := context.AfterFunc(ic.ctx, cancel) // the inner call ended: nobody needs the answer
		defer stop()
	}
	asks.waiting.Add(1)
	start := time.Now()
	// Deferred: after a panic in f (guard.go) a count left at 1 would hold
	// the call's deadline off for good.
	defer func() {
		asks.paused.Add(int64(time.Since(start)))
		asks.waiting.Add(-1)
	}()
	res, note, err := f(ctx, asks)
	if note != "" {
		ic.note(note)
	}
	if ref := (*relayRefusal)(nil); errors.As(err, &ref) {
		ic.note(fmt.Sprintf("%s.%s asked for input (%s), and the bridge refused it: %s", ic.server, ic.tool, what, ref.msg))
		return nil, err
	}
	if err != nil {
		ic.note(fmt.Sprintf("%s.%s asked for input (%s), and the question failed: %s; it was declined", ic.server, ic.tool, what, printable.String(clip(err.Error(), 200))))
		return nil, err
	}
	return res, nil
}

// RelayInput asks the human of the inner call of ctx (the context
// Client.Call runs the request under) the elicitation an upstream task
// sent as input_required, within bound and the call's life, and returns
// the answer; without an answer it is a decline, noted on the call's
// result. For the tasks relay: a task's questions come with its id.
func RelayInput(ctx context.Context, bound time.Duration, p mcp.ElicitationParams) *mcp.ElicitationResult {
	decline := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
	ic := innerFrom(ctx)
	if ic == nil {
		return decline
	}
	res, err := ic.ask(ctx, bound, "elicitation", func(ctx context.Context, asks *approvals) (any, string, error) {
		return relayElicitation(ctx, ic, asks, p)
	})
	if r, is := res.(*mcp.ElicitationResult); err == nil && is {
		return r
	}
	return decline // a task's question has no error to answer it with
}

// declined is a decline for an elicitation; sampling has no decline, so
// it is the error a user's rejection gives (-1).
func declined(id mcp.RequestId, what string) (*transport.JSONRPCResponse, error) {
	if what == "sampling" {
		return transport.NewJSONRPCErrorResponse(id, -1, "the request was not relayed to a user", nil), nil
	}
	return transport.NewJSONRPCResultResponse(id, json.RawMessage(`{"action":"decline"}`)), nil
}

func noteAll(ic *innerCall, all []*innerCall, msg string) {
	if ic != nil {
		ic.note(msg)
	}
	for _, c := range all {
		c.note(msg)
	}
}

// relayElicitationRaw decodes an elicitation/create and relays it.
func (s *serverConn) relayElicitationRaw(ctx context.Context, ic *innerCall, asks *approvals, raw json.RawMessage) (any, string, error) {
	var p mcp.ElicitationParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, "", fmt.Errorf("invalid elicitation/create params: %w", err)
	}
	return relayElicitation(ctx, ic, asks, p)
}

// relayElicitation passes a form (or, when the human's client declared it,
// a URL) request on, its message cleaned (relayedMessage) and prefixed
// with the server and tool it comes from; a mode the client did not
// declare is declined. A form that reuses the field of the bridge's own
// approval form, a link that is not plain https (badElicitationURL), and
// any question past MaxInputRounds in the call, are refused before the
// human sees them; a form's titles and descriptions are cleaned like its
// message (cleanSchema).
func relayElicitation(ctx context.Context, ic *innerCall, asks *approvals, p mcp.ElicitationParams) (any, string, error) {
	decline := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
	caps := asks.human.Caps()
	if p.Mode == mcp.ElicitationModeURL && !caps.URL || p.Mode != mcp.ElicitationModeURL && !caps.Form {
		mode := p.Mode
		if mode == "" {
			mode = mcp.ElicitationModeForm
		}
		return decline, fmt.Sprintf("%s.%s asked for input in %s mode, which your MCP client did not declare; it was declined", ic.server, ic.tool, printable.String(clip(mode, 32))), nil
	}
	if imitatesApproval(p.RequestedSchema) {
		return nil, "", &relayRefusal{code: mcp.INVALID_PARAMS, msg: "the form reuses the field of the bridge's approval form (decision: once, run or deny), so it was not shown to the user"}
	}
	// The cap of the input_required rounds (heldCall.ask) holds for a
	// legacy client too, whose questions go out as elicitation/create with
	// nothing else to bound them: a server that asks in a loop would
	// otherwise reach the person without end. Counted for every client
	// (a 2026-07-28 client's rounds are capped as well), before the person
	// is reached.
	if err := asks.countRelayed(); err != nil {
		return nil, "", err
	}
	if p.Mode == mcp.ElicitationModeURL {
		if why := badElicitationURL(p.URL); why != "" {
			return nil, "", &relayRefusal{code: mcp.INVALID_PARAMS, msg: "the sign-in link " + why + ", so it was not shown to the user"}
		}
	}
	if p.RequestedSchema != nil {
		p.RequestedSchema = cleanSchema(p.RequestedSchema)
	}
	who := ic.server // a start's sign-in belongs to no tool
	if ic.tool != "" {
		who += "." + ic.tool
	}
	p.Message = relayedMessage(who, p.Message)
	p.Meta = nil
	res, err := asks.human.Elicit(ctx, mcp.ElicitationRequest{Params: p})
	if err != nil {
		return nil, "", err
	}
	return res, "", nil
}

// maxRelayedMessage bounds an upstream's elicitation message as relayed,
// in bytes, the "…" that marks a cut included.
const maxRelayedMessage = 1000

// countRelayed counts one question or sampling request of the call
// toward MaxInputRounds, and refuses it past the cap. The count stops
// growing at the cap (give or take the requests racing to it), so it
// cannot wrap however often a server asks past it.
func (a *approvals) countRelayed() error {
	if a.relayed.Load() >= MaxInputRounds || a.relayed.Add(1) > MaxInputRounds {
		return &relayRefusal{code: mcp.INVALID_REQUEST, msg: fmt.Sprintf("this run_python call already put %d questions or sampling requests from MCP servers to the user, the cap; this one was not relayed", MaxInputRounds)}
	}
	return nil
}

// maxElicitationURL caps a URL-mode elicitation's link, in bytes.
const maxElicitationURL = 2048

// badElicitationURL says what is wrong with a URL-mode elicitation's link
// ("" when nothing): the person is asked to open it, so it must be an
// absolute https link (http only to this machine), of a sane length, with
// nothing in it a terminal or a browser's address bar would hide.
func badElicitationURL(raw string) string {
	if len(raw) > maxElicitationURL {
		return fmt.Sprintf("is %d bytes long, over %d", len(raw), maxElicitationURL)
	}
	for _, r := range raw {
		if r <= 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || printable.IsBidiControl(r) {
			return "holds a space or a control character"
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "is not an absolute URL"
	}
	local := u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1" || u.Hostname() == "::1"
	if u.Scheme != "https" && !(u.Scheme == "http" && local) {
		return fmt.Sprintf("uses %q, not https", printable.Log(clip(u.Scheme, 20)))
	}
	if u.User != nil {
		return "carries a user name, which can disguise its host"
	}
	return ""
}

// cleanSchema is a requested form schema with its titles and descriptions
// cleaned as a question's message is (control and bidi characters out),
// at any depth: the person's client shows them as labels.
func cleanSchema(schema any) any {
	raw, err := json.Marshal(schema)
	if err != nil {
		return schema
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return schema
	}
	return cleanLabels(v, 0)
}

// cleanLabels cleans the "title" and "description" strings of v's objects,
// and of enumNames and enum titles, to depth 32.
func cleanLabels(v any, depth int) any {
	if depth > 32 {
		return v
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if s, ok := x.(string); ok && (k == "title" || k == "description") {
				t[k] = clipLabel(cleanMessage(s))
				continue
			}
			if k == "enumNames" {
				if names, ok := x.([]any); ok {
					for i, n := range names {
						if s, ok := n.(string); ok {
							names[i] = clipLabel(cleanMessage(s))
						}
					}
					continue
				}
			}
			t[k] = cleanLabels(x, depth+1)
		}
	case []any:
		for i, x := range t {
			t[i] = cleanLabels(x, depth+1)
		}
	}
	return v
}

// clipLabel bounds one label of a relayed form.
func clipLabel(s string) string {
	const maxLabel = 1024
	if len(s) <= maxLabel {
		return s
	}
	cut := maxLabel
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// relayedMessage is an upstream's elicitation message as the person sees
// it: "who asks: " and the message cleaned (cleanMessage) and cut to
// maxRelayedMessage. The message cannot push the prefix out of sight
// (leading blank lines, a carriage return, a terminal escape) nor run on
// for pages, so who, the server and tool, is on the first visible line and
// a form cannot pass for one of the bridge's own. who is on one line: a
// tool's name is the server's to choose.
func relayedMessage(who, msg string) string {
	who = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", " ").Replace(printable.Log(who))
	msg = cleanMessage(msg)
	if len(msg) > maxRelayedMessage {
		const mark = "…"
		cut := maxRelayedMessage - len(mark)
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = strings.TrimRightFunc(msg[:cut], unicode.IsSpace) + mark
	}
	if msg == "" {
		return who + " asks:"
	}
	return who + " asks: " + msg
}

// cleanMessage drops what could hide or reorder text from s: C0 and C1
// controls, DEL and the bidirectional controls (printable.String's set),
// and bytes that are not UTF-8 (as U+FFFD). A line break (\n, \r\n, \r,
// NEL, U+2028, U+2029) becomes \n and a tab a space. Leading and trailing
// blank space goes, and each run of blank lines, invisible characters
// counted as blank, becomes one blank line.
func cleanMessage(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			b.WriteByte('\n')
		case r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r >= 0x7f && r <= 0x9f || printable.IsBidiControl(r):
		default:
			b.WriteRune(r)
		}
	}
	lines := strings.Split(b.String(), "\n")
	out := make([]string, 0, len(lines))
	gap := false // a blank line is due before the next line with text
	for _, l := range lines {
		if strings.TrimFunc(l, invisible) == "" {
			gap = len(out) > 0
			continue
		}
		if gap {
			out = append(out, "")
			gap = false
		}
		out = append(out, l)
	}
	return strings.TrimRightFunc(strings.TrimLeftFunc(strings.Join(out, "\n"), invisible), unicode.IsSpace)
}

// invisible reports whether r shows nothing: white space, a format
// character (zero-width space, BOM, joiners) or another default-ignorable
// one (Hangul fillers).
func invisible(r rune) bool {
	return unicode.IsSpace(r) || unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point)
}

// imitatesApproval reports whether a form's requestedSchema reuses the
// field of the bridge's approval form (approvalForm): a property named
// decision (any case) that offers once, run or deny. Such a form, relayed,
// would pass for the bridge's own question, and a person used to
// answering "run" there would answer it here. A schema that does not
// encode is refused too (it came from JSON, so it always does).
func imitatesApproval(schema any) bool {
	if schema == nil {
		return false
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return true
	}
	var s struct {
		Properties map[string]any `json:"properties"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return false // not an object schema: nothing a client renders as a field
	}
	for name, prop := range s.Properties {
		if strings.EqualFold(strings.TrimSpace(name), "decision") && offersDecision(prop) {
			return true
		}
	}
	return false
}

// offersDecision reports whether the schema v offers once, run or deny as
// a choice, at any depth: in an enum, or as a const (titled enums' oneOf
// and anyOf, an array's items).
func offersDecision(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch k {
			case "enum":
				if choices, ok := x.([]any); ok {
					for _, c := range choices {
						if isDecision(c) {
							return true
						}
					}
				}
			case "const":
				if isDecision(x) {
					return true
				}
			default:
				if offersDecision(x) {
					return true
				}
			}
		}
	case []any:
		for _, x := range v {
			if offersDecision(x) {
				return true
			}
		}
	}
	return false
}

func isDecision(v any) bool {
	s, _ := v.(string)
	switch strings.ToLower(strings.TrimSpace(s)) {
	case decisionOnce, decisionRun, decisionDeny:
		return true
	}
	return false
}

// maxSamplingMessages bounds the messages of a relayed sampling request:
// the sum of their JSON sizes, in bytes. They go to the human's model, on
// the human's account.
const maxSamplingMessages = 64 << 10

// maxSamplingPrompt caps a relayed sampling request's system prompt, in
// bytes: it too goes to the human's model.
const maxSamplingPrompt = 16 << 10

// relaySampling passes a sampling request on with its system prompt
// prefixed by the server it comes from (samplingPrompt), so the human's
// client and model see whose request it is; messages over
// maxSamplingMessages are refused.
func (s *serverConn) relaySampling(ctx context.Context, ic *innerCall, asks *approvals, raw json.RawMessage) (any, string, error) {
	if !asks.human.Caps().Sampling {
		return nil, "", fmt.Errorf("your MCP client did not declare sampling")
	}
	var p mcp.CreateMessageParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, "", fmt.Errorf("invalid sampling/createMessage params: %w", err)
	}
	size := 0
	for i := range p.Messages {
		content, err := mcp.ParseSamplingContent(p.Messages[i].Content)
		if err != nil {
			return nil, "", fmt.Errorf("sampling message %d: %w", i, err)
		}
		p.Messages[i].Content = content
		b, err := json.Marshal(p.Messages[i])
		if err != nil {
			return nil, "", fmt.Errorf("sampling message %d: %w", i, err)
		}
		size += len(b)
	}
	if size > maxSamplingMessages {
		return nil, "", &relayRefusal{code: mcp.INVALID_PARAMS, msg: fmt.Sprintf("the sampling messages are %d bytes of JSON, over the bridge's cap of %d (64 KiB); they were not relayed", size, maxSamplingMessages)}
	}
	if len(p.SystemPrompt) > maxSamplingPrompt {
		return nil, "", &relayRefusal{code: mcp.INVALID_PARAMS, msg: fmt.Sprintf("the sampling system prompt is %d bytes, over the bridge's cap of %d (16 KiB); it was not relayed", len(p.SystemPrompt), maxSamplingPrompt)}
	}
	// A sampling request spends the person's model on the server's behalf:
	// it counts toward the same cap per call as a question (relayElicitation).
	if err := asks.countRelayed(); err != nil {
		return nil, "", err
	}
	p.SystemPrompt = samplingPrompt(s.name, p.SystemPrompt)
	res, err := asks.human.Sample(ctx, mcp.CreateMessageRequest{CreateMessageParams: p})
	if err != nil {
		return nil, "", err
	}
	return res, "", nil
}

// samplingPrompt is the system prompt of a sampling request of server:
// prompt, named as the server's; a request without one gets one that
// names the server.
func samplingPrompt(server, prompt string) string {
	tag := fmt.Sprintf("[Request from MCP server '%s' through the bridge]", printable.Log(server))
	if strings.TrimSpace(prompt) == "" {
		return tag
	}
	return tag + " " + prompt
}
