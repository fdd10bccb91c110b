package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/bridge-mcp/bridge/protocol"
)

// Store is the host's persistent memory and saved-tool store (engine/store
// implements it). Its errors may be *protocol.StoreError, which carry the
// link error's code and kind.
type Store interface {
	MemoryGet(key string) (protocol.MemoryRecord, error)
	MemoryPut(p protocol.MemoryPutParams) (protocol.MemoryPutResult, error)
	MemoryDelete(key string) (bool, error)
	MemoryList(p protocol.MemoryListParams) (protocol.MemoryListResult, error)
	SaveTool(p protocol.SaveToolParams) (protocol.SavedTool, error)
	SavedTools() ([]protocol.SavedTool, []string, error)
	DeleteTool(name string) (bool, error)
}

// UserToolsServer is the server name saved tools carry in search results.
const UserToolsServer = "user_tools"

// storeMethod answers method with f: params are decoded strictly (LNK-3)
// into P, and the store's errors become link errors with its code and kind.
func storeMethod[P any](method string, f func(s Store, p P) (any, error)) boxHandler {
	return func(r *Router, _ context.Context, scope Scope, params json.RawMessage) (any, error) {
		st := r.storeFor(scope.Principal)
		if st == nil {
			return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, "The memory and saved-tool store is not available in this bridge")
		}
		var p P
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		res, err := f(st, p)
		if err != nil {
			var se *protocol.StoreError
			if errors.As(err, &se) {
				return nil, LinkError(se.Code, se.Kind, se.Message)
			}
			return nil, err
		}
		return res, nil
	}
}

// userToolDocs are the saved tools as searchable tools of the pseudo-server
// user_tools; a store failure gives none, with a warning.
func (r *Router) userToolDocs(principal string) ([]ToolInfo, string) {
	st := r.storeFor(principal)
	if st == nil {
		return nil, ""
	}
	tools, _, err := st.SavedTools()
	if err != nil {
		return nil, fmt.Sprintf("search skipped the saved tools: %v", err)
	}
	out := make([]ToolInfo, 0, len(tools))
	for _, t := range tools {
		desc := strings.TrimSpace(t.Doc)
		sig := "Signature: " + t.Name + t.Signature + "; use: from user_tools import " + t.Name
		if desc != "" {
			desc += "\n"
		}
		out = append(out, ToolInfo{Name: t.Name, Description: desc + sig})
	}
	return out, ""
}

// boxNotes bounds the notes a sandbox reports in its exec result.
func boxNotes(notes []string) []string {
	if len(notes) > protocol.MaxNotes {
		notes = notes[:protocol.MaxNotes]
	}
	out := make([]string, 0, len(notes))
	for _, n := range notes {
		if len(n) > protocol.MaxNoteBytes {
			n = strings.ToValidUTF8(n[:protocol.MaxNoteBytes], "") + "..."
		}
		out = append(out, n)
	}
	return out
}
