package actors

// resources.go serves the resources of a server the call grants:
// list_resources, list_resource_templates and read_resource
// (protocol/resources.go). They pass the same gates as a tool call: the
// grant, the policy (its per-server "resources" switch) and the cap on
// calls per execution; a reply must fit one link frame.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bridge-mcp/bridge/actors/mcpwire"
	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
)

// maxResourcePages bounds the pages of one list_resources: a server whose
// cursors never end cannot keep the call busy forever.
const maxResourcePages = 100

// maxResourceURI bounds a uri the sandbox asks to read.
const maxResourceURI = 8 << 10

// ResourcesAllowed returns an error when the policy turns server's
// resources off ("resources": false, for the server or for "*"); the
// server's own entry wins over "*".
func (p *Policy) ResourcesAllowed(server string) error {
	if p == nil {
		return nil
	}
	if p.Err != nil {
		return fmt.Errorf("Resources are disabled: the policy file %s is invalid: %v", p.Source, p.Err)
	}
	for _, key := range []string{server, "*"} {
		if sp, ok := p.Servers[key]; ok && sp.Resources != nil {
			if !*sp.Resources {
				return fmt.Errorf("Resources of server '%s' are turned off by the policy (\"resources\": false in %s)", server, p.Source)
			}
			return nil
		}
	}
	return nil
}

// countCall counts one proxied request of the execution against the
// policy's maxToolCallsPerExecution; what names it in the log.
func (r *Router) countCall(cat *Catalog, scope Scope, server, what string) error {
	max := cat.policyMaxCalls(scope.Principal)
	if max <= 0 || scope.ToolCalls == nil || scope.ToolCalls.Add(1) <= int64(max) {
		return nil
	}
	msg := fmt.Sprintf("Tool call limit of %d per execution reached (maxToolCallsPerExecution in %s)", max, cat.policy.Source)
	if firstRefusal(scope) {
		scope.log(r.Log.Warn()).Str("server", server).Str("tool", printable.Log(what)).Msg(msg)
	}
	return LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, msg)
}

// resourceServer is the server a resource request of scope names, once
// the grant, the policy and the call cap let it through.
func (r *Router) resourceServer(cat *Catalog, scope Scope, server, what string) (*CatalogServer, error) {
	s, err := r.granted(cat, scope, server)
	if err != nil {
		return nil, err
	}
	if err := cat.policy.ResourcesAllowedFor(scope.Principal, server); err != nil {
		if firstRefusal(scope) {
			scope.log(r.Log.Warn()).Str("server", server).Msg(printable.Log(err.Error()))
		}
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, err.Error())
	}
	if err := r.countCall(cat, scope, server, what); err != nil {
		return nil, err
	}
	return s, nil
}

// granted is the server of cat named server when scope grants it (PXY-7),
// else the error that names the fix.
func (r *Router) granted(cat *Catalog, scope Scope, server string) (*CatalogServer, error) {
	s := cat.Server(server)
	if s == nil {
		if err := r.notLoadedError(server); err != nil {
			return nil, err
		}
	}
	if !contains(scope.Servers, server) || s == nil {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, notAvailable(server, s != nil))
	}
	return s, nil
}

// upstreamTimeout is the bound of one proxied request of scope: base,
// cut to what is left of the call.
func upstreamTimeout(scope Scope, base time.Duration) time.Duration {
	if left := time.Until(scope.Deadline); !scope.Deadline.IsZero() && left < base {
		return max(left, time.Millisecond)
	}
	return base
}

// resourceRequest forwards one resources/* request to s and returns its raw
// result, which must fit one frame.
func (r *Router) resourceRequest(ctx context.Context, s *CatalogServer, scope Scope, method string, params map[string]any, what string) (json.RawMessage, error) {
	c, release, err := s.clientFor(scope.Principal)
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, err.Error())
	}
	defer release()
	if asSignIn(c.State().Err) != nil {
		// A start that needed sign-in: sign in through the call's client
		// when it can (signin.go); the request below reports a failure.
		_, _ = c.Ready(withInner(ctx, s.Spec.Name, "", scope.human))
	}
	res, err := c.roundTrip(ctx, method, func(string) any { return params }, what,
		upstreamTimeout(scope, r.CallTimeout), "MCP_BRIDGE_CALL_TIMEOUT", nil)
	if err != nil {
		var rpcErr *rpcError
		switch {
		case errors.Is(err, ErrCallTimeout):
			return nil, LinkError(protocol.CodeTimeout, protocol.KindTimeout, err.Error())
		case errors.As(err, &rpcErr) && rpcErr.code == -32601:
			return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable,
				fmt.Sprintf("Server '%s' does not offer resources (%s answered: %s)", s.Spec.Name, method, rpcErr.msg))
		case errors.As(err, &rpcErr) && (rpcErr.code == -32002 || rpcErr.code == -32602) && method == "resources/read":
			return nil, LinkError(protocol.CodeNotFound, protocol.KindNotFound, fmt.Sprintf("%s: %s", what, rpcErr.msg))
		case errors.Is(err, mcpwire.ErrOverCap):
			// The transport refused it unread: say what it was for.
			return nil, LinkError(protocol.CodeServerError, protocol.KindServerError,
				fmt.Sprintf("%s: the reply is over the %d-byte frame limit (MCP_BRIDGE_MAX_FRAME_BYTES)", what, r.MaxFrame))
		}
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, err.Error())
	}
	if n := len(res) + 64; r.MaxFrame > 0 && n > r.MaxFrame {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError,
			fmt.Sprintf("%s: the reply is %d bytes, over the %d-byte frame limit (MCP_BRIDGE_MAX_FRAME_BYTES)", what, len(res), r.MaxFrame))
	}
	return res, nil
}

// listResourcePages is every page of the server's resources/list (or, with
// key "resourceTemplates", resources/templates/list), together within one
// frame.
func (r *Router) listResourcePages(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage, method, upstream, key string) (any, error) {
	var p struct {
		Server string `json:"server"`
	}
	if err := decodeParams(method, params, &p); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%s of server '%s'", upstream, p.Server)
	s, err := r.resourceServer(cat, scope, p.Server, upstream)
	if err != nil {
		return nil, err
	}
	items := []json.RawMessage{}
	size, cursor := 0, ""
	for page := 0; page < maxResourcePages; page++ {
		q := map[string]any{}
		if cursor != "" {
			q["cursor"] = cursor
		}
		raw, err := r.resourceRequest(ctx, s, scope, upstream, q, what)
		if err != nil {
			return nil, err
		}
		var res map[string]json.RawMessage
		var got []json.RawMessage
		var next string
		if err := json.Unmarshal(raw, &res); err != nil || json.Unmarshal(res[key], &got) != nil {
			return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, fmt.Sprintf("%s: invalid reply from the server", what))
		}
		_ = json.Unmarshal(res["nextCursor"], &next)
		for _, it := range got {
			size += len(it) + 1
		}
		if r.MaxFrame > 0 && size+64 > r.MaxFrame {
			return nil, LinkError(protocol.CodeServerError, protocol.KindServerError,
				fmt.Sprintf("%s: the list is over %d bytes, the frame limit (MCP_BRIDGE_MAX_FRAME_BYTES)", what, r.MaxFrame))
		}
		items = append(items, got...)
		if next == "" || next == cursor {
			break
		}
		cursor = next
	}
	return map[string]any{key: items}, nil
}

func (r *Router) listResources(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	return r.listResourcePages(ctx, cat, scope, params, protocol.MethodListResources, "resources/list", "resources")
}

func (r *Router) listResourceTemplates(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	return r.listResourcePages(ctx, cat, scope, params, protocol.MethodListResourceTemplates, "resources/templates/list", "resourceTemplates")
}

// readResource reads one resource of a granted server.
func (r *Router) readResource(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p struct {
		Server string `json:"server"`
		URI    string `json:"uri"`
	}
	if err := decodeParams(protocol.MethodReadResource, params, &p); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.URI) == "" {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "Missing resource uri")
	}
	if len(p.URI) > maxResourceURI {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments,
			fmt.Sprintf("Resource uri is %d bytes; the limit is %d", len(p.URI), maxResourceURI))
	}
	s, err := r.resourceServer(cat, scope, p.Server, "resources/read")
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("Resource %s of server '%s'", clip(printable.String(p.URI), 200), p.Server)
	raw, err := r.resourceRequest(ctx, s, scope, "resources/read", map[string]any{"uri": p.URI}, what)
	if err != nil {
		return nil, err
	}
	return map[string]json.RawMessage{"result": raw}, nil
}
