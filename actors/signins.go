package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bridge-mcp/bridge/protocol"
)

// signins.go answers runtime.signins() and runtime.signout(server): a
// principal's own upstream sign-ins to the servers whose config says
// "identity": "principal" (bridge serve; identities.go). Both act on the
// calling principal (Scope.Principal) only: no params name another.

// noOwnSignIns is signout's refusal where principals have no sign-ins of
// their own: bridge run, or a call without a principal.
const noOwnSignIns = "sign-ins of your own exist only under bridge serve"

// signIns answers runtime.signins(): the calling principal's own sign-ins,
// by server name, never a token; none without a principal or a store.
func (r *Router) signIns(_ context.Context, scope Scope, params json.RawMessage) (any, error) {
	if err := decodeParams(protocol.MethodSignIns, params, &struct{}{}); err != nil {
		return nil, err
	}
	list := []SignIn{}
	if r.SignIns != nil && scope.Principal != "" {
		list = append(list, r.SignIns.List(scope.Principal)...)
	}
	return map[string]any{"signins": list}, nil
}

// signOut answers runtime.signout(server): it forgets the calling
// principal's tokens for an identity: principal server of the catalog and
// closes their connection to it, so their next call signs in again.
func (r *Router) signOut(_ context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p protocol.ServerParams
	if err := decodeParams(protocol.MethodSignOut, params, &p); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Server) == "" {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "Missing 'server' value")
	}
	// First: under bridge run no server has per-principal sign-ins, so
	// the shared-server refusal below would misname the config.
	if r.SignIns == nil || scope.Principal == "" {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, noOwnSignIns)
	}
	name := cat.serverName(p.Server)
	cs := cat.Server(name)
	if cs == nil {
		if err := r.notLoadedError(name); err != nil {
			return nil, err
		}
		return nil, LinkError(protocol.CodeNotFound, protocol.KindNotFound, r.unknownServer(cat, name))
	}
	if cs.pairs == nil {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, fmt.Sprintf(
			"Server '%s' uses the operator's shared sign-in (identity: shared): only the operator can sign it out, with bridge auth logout %s", name, name))
	}
	ok, err := r.SignIns.SignOut(scope.Principal, name)
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, err.Error())
	}
	cs.pairs.forget(scope.Principal)
	return map[string]bool{"signed_out": ok}, nil
}
