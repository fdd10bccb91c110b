package actors

// era.go speaks to servers of both MCP generations. A legacy server
// (2025-11-25 and before) is reached with initialize, and its requests are
// sent as they are. A modern server (2026-07-28) refuses initialize with
// -32022: the bridge sends it server/discover instead, and every request
// after it carries the _meta that revision requires (protocol version,
// client capabilities and client info) and, over HTTP, the standard headers
// (Mcp-Method, Mcp-Name, Mcp-Param-*). The era a server was last reached
// with is remembered with its catalog, so its next start goes straight to
// it; a remembered era that fails is probed again once, in the same start.
//
// A server that speaks both stays legacy unless modern was remembered
// (docs/DECISIONS.md, "Both MCP generations"): a legacy start costs one
// round trip, and nothing the bridge passes through needs more.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Era is the protocol generation a server is reached with.
type Era string

const (
	// EraUnknown: never reached, or no catalog remembers it.
	EraUnknown Era = ""
	// EraLegacy: initialize, then requests as they are (2025-11-25).
	EraLegacy Era = "legacy"
	// EraModern: server/discover, then requests with their _meta
	// (2026-07-28).
	EraModern Era = "modern"
)

// modernVersion is the modern revision the bridge speaks.
const modernVersion = mcp.ProtocolVersion20260728

// tasksExtension is the 2026-07-28 tasks extension's capability key.
const tasksExtension = "io.modelcontextprotocol/tasks"

// discoverBound bounds a server/discover sent to a server whose era is not
// known to be modern: a legacy server may ignore the unknown method, and on
// stdio nothing else would end the wait.
const discoverBound = 5 * time.Second

// DescribeEra is how the server was last reached, in words, for doctor
// and describe_server: "modern (2026-07-28), probed 2026-11-28 12:03:05
// UTC".
func (c ServerCatalog) DescribeEra() string {
	if c.Era == EraUnknown {
		return "not reached yet"
	}
	s := string(c.Era)
	if c.Protocol != "" {
		s += " (" + c.Protocol + ")"
	}
	if !c.Probed.IsZero() {
		s += ", probed " + c.Probed.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return s
}

// modernRefusal says whether err is a server's refusal of a legacy
// initialize that names a modern revision it speaks (-32022), or, over
// streamable HTTP, the 4xx status a modern server may give initialize,
// which mcp-go reports as a legacy SSE server before it reads the body.
func modernRefusal(err error, http bool) bool {
	var version mcp.UnsupportedProtocolVersionError
	if errors.As(err, &version) {
		return slices.ContainsFunc(version.Supported, mcp.IsModernProtocol)
	}
	return http && errors.Is(err, transport.ErrLegacySSEServer)
}

// discoverResult is the part of a server/discover result the bridge reads:
// whether the server announces tool list changes, and its serverInfo.
type discoverResult struct {
	Capabilities struct {
		Tools *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"tools"`
	} `json:"capabilities"`
	Meta map[string]json.RawMessage `json:"_meta"`
}

// listenBackoff bounds the wait before a subscriptions/listen stream that
// ended is opened again: it starts at the minimum and doubles.
const (
	listenBackoffMin = time.Second
	listenBackoffMax = 30 * time.Second
)

// listen keeps a subscriptions/listen request open on a modern server that
// announces tool list changes: 2026-07-28 sends notifications/tools/
// list_changed only on such a stream (it replaces the legacy GET stream),
// and they reach the connection's notification handler like any other. A
// stream that ends is opened again after a backoff, until the connection's
// life ends. Runs on the connection's wait group.
func (s *serverConn) listen() {
	defer s.wg.Done()
	defer guard(s.log, "a subscriptions/listen stream", func(any) { s.abort() })
	wait := listenBackoffMin
	for s.life.Err() == nil {
		start := time.Now()
		_, err := s.request(s.life, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
		if s.life.Err() != nil {
			return
		}
		var rpcErr *rpcError
		if errors.As(err, &rpcErr) && rpcErr.code == mcp.METHOD_NOT_FOUND {
			s.log.Info().Msg("the server announces tool list changes but has no subscriptions/listen; its new tools show at its next start")
			return
		}
		if time.Since(start) > listenBackoffMax {
			wait = listenBackoffMin // it was up a while: not a failing loop
		}
		t := time.NewTimer(wait)
		select {
		case <-s.life.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, listenBackoffMax)
	}
}

// discover reaches s as a modern server: server/discover at the bridge's
// modern revision, and, when the server names another modern revision the
// bridge knows, once more at that one. On success s is modern and every
// request after it carries its _meta.
func (s *serverConn) discover(ctx context.Context) (*discoverResult, error) {
	version := modernVersion
	for range 2 {
		s.setProtocol(version)
		raw, err := s.request(ctx, string(mcp.MethodServerDiscover), map[string]any{})
		if err == nil {
			var res discoverResult
			if err := json.Unmarshal(raw, &res); err != nil {
				s.setProtocol("")
				return nil, fmt.Errorf("its server/discover result is unusable: %w", err)
			}
			return &res, nil
		}
		s.setProtocol("")
		var rpcErr *rpcError
		if errors.As(err, &rpcErr) && rpcErr.code == mcp.UNSUPPORTED_PROTOCOL_VERSION {
			if next := rpcErr.supportedModern(); next != "" && next != version {
				version = next
				continue
			}
		}
		return nil, err
	}
	return nil, errors.New("server/discover: no modern revision both sides speak")
}

// setProtocol makes s speak version ("" : legacy, as initialize left it):
// the _meta of its requests, and over HTTP the Mcp-Protocol-Version header,
// which must agree with it.
func (s *serverConn) setProtocol(version string) {
	s.modern.Store(version)
	// "" clears the header too: a legacy initialize after a failed
	// discover must not carry the modern version in it.
	if v, ok := s.tr.(interface{ SetProtocolVersion(string) }); ok {
		v.SetProtocolVersion(version)
	}
}

// protocol is the modern revision s speaks; "" for a legacy server.
func (s *serverConn) protocol() string {
	v, _ := s.modern.Load().(string)
	return v
}

// supportedModern is the newest modern revision both the bridge and a
// -32022 error's data name; "" when none.
func (e *rpcError) supportedModern() string {
	var data mcp.UnsupportedProtocolVersionData
	if json.Unmarshal(e.data, &data) != nil {
		return ""
	}
	var modern []string
	for _, v := range data.Supported {
		if mcp.IsModernProtocol(v) {
			modern = append(modern, v)
		}
	}
	return mcp.NegotiateMutuallySupportedVersion(modern)
}

// outgoing is req as its server must get it: the trace context of ctx
// in params' _meta, for any server; for a modern one, the revision's _meta
// merged in too and, over HTTP, the standard headers. The caller's own
// _meta keys, such as progressToken, are kept. Params that are no object
// cannot carry _meta and go as they are.
func (s *serverConn) outgoing(ctx context.Context, req transport.JSONRPCRequest) transport.JSONRPCRequest {
	version := s.protocol()
	traced := TraceHeaders(ctx)
	if version == "" && traced == nil {
		return req
	}
	fields := map[string]json.RawMessage{}
	if req.Params != nil {
		raw, err := json.Marshal(req.Params)
		if err != nil || json.Unmarshal(raw, &fields) != nil {
			return req
		}
	}
	meta := map[string]any{}
	if raw, ok := fields["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	for k, v := range traced {
		meta[k] = v
	}
	if version != "" {
		caps := s.declared.declared()
		caps.Extensions = map[string]any{tasksExtension: map[string]any{}}
		meta[mcp.MetaKeyProtocolVersion] = version
		meta[mcp.MetaKeyClientCapabilities] = caps
		meta[mcp.MetaKeyClientInfo] = bridgeInfo
	}
	encoded, err := json.Marshal(meta)
	if err != nil {
		return req
	}
	fields["_meta"] = encoded
	params, err := json.Marshal(fields)
	if err != nil {
		return req
	}
	req.Params = json.RawMessage(params)
	if version != "" && s.child == nil { // http and sse: stdio has no headers
		req.Header = s.standardHeaders(version, req.Method, params)
	}
	return req
}

// standardHeaders are the Mcp-Method and Mcp-Name headers of a modern
// request over HTTP, and the Mcp-Param-* headers a tools/call's tool asks
// for with x-mcp-header in its input schema.
func (s *serverConn) standardHeaders(version, method string, params json.RawMessage) http.Header {
	h := http.Header{}
	for k, v := range mcp.StandardHeaders(version, mcp.MCPMethod(method), params) {
		h.Set(k, v)
	}
	if method != string(mcp.MethodToolsCall) {
		return h
	}
	name, _ := mcp.ExtractHeaderName(mcp.MethodToolsCall, params)
	if schema := s.schemas.get(name); schema != nil {
		tool := mcp.Tool{Name: name, RawInputSchema: schema}
		for k, v := range mcp.GenerateParamHeaders(&tool, params) {
			h.Set(k, v)
		}
	}
	return h
}

// bridgeInfo is the client identity the bridge gives servers.
var bridgeInfo = mcp.Implementation{Name: "bridge", Version: "1"}

// serverInfoOf reads a modern result's _meta serverInfo; ok false when it
// has none.
func serverInfoOf(meta map[string]json.RawMessage) (mcp.Implementation, bool) {
	var info mcp.Implementation
	raw, ok := meta[mcp.MetaKeyServerInfo]
	if !ok || json.Unmarshal(raw, &info) != nil {
		return mcp.Implementation{}, false
	}
	return info, true
}

// toolSchemas maps a server's tool names to their input schemas: written
// when its tools are listed, read by each modern HTTP tools/call.
type toolSchemas struct {
	mu sync.RWMutex
	m  map[string]json.RawMessage
}

func (t *toolSchemas) set(tools []ToolInfo) {
	m := make(map[string]json.RawMessage, len(tools))
	for _, tool := range tools {
		if tool.Skip == "" {
			m[tool.Name] = tool.InputSchema
		}
	}
	t.mu.Lock()
	t.m = m
	t.mu.Unlock()
}

func (t *toolSchemas) get(name string) json.RawMessage {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[name]
}
