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
	MemoryList() ([]protocol.MemoryInfo, error)
	SaveTool(p protocol.SaveToolParams) (protocol.SavedTool, error)
	SavedTools() ([]protocol.SavedTool, []string, error)
	DeleteTool(name string) (bool, error)
}

// storeMethods are the box→host methods the store serves.
var storeMethods = map[string]bool{
	protocol.MethodMemoryGet: true, protocol.MethodMemoryPut: true, protocol.MethodMemoryDelete: true,
	protocol.MethodMemoryList: true, protocol.MethodSaveTool: true, protocol.MethodSavedTools: true,
	protocol.MethodDeleteTool: true,
}

// UserToolsServer is the server name saved tools carry in search results.
const UserToolsServer = "user_tools"

// serveStore answers a store method; params are decoded strictly (LNK-3).
func (r *Router) serveStore(method string, params json.RawMessage) (any, error) {
	if r.Store == nil {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, "The memory and saved-tool store is not available in this bridge")
	}
	res, err := r.storeCall(method, params)
	if err != nil {
		var se *protocol.StoreError
		if errors.As(err, &se) {
			return nil, LinkError(se.Code, se.Kind, se.Message)
		}
		return nil, err
	}
	return res, nil
}

func (r *Router) storeCall(method string, params json.RawMessage) (any, error) {
	switch method {
	case protocol.MethodMemoryGet:
		var p protocol.KeyParams
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return r.Store.MemoryGet(p.Key)
	case protocol.MethodMemoryPut:
		var p protocol.MemoryPutParams
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return r.Store.MemoryPut(p)
	case protocol.MethodMemoryDelete:
		var p protocol.KeyParams
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		ok, err := r.Store.MemoryDelete(p.Key)
		return map[string]bool{"deleted": ok}, err
	case protocol.MethodMemoryList:
		if err := decodeParams(method, params, &struct{}{}); err != nil {
			return nil, err
		}
		list, err := r.Store.MemoryList()
		return map[string]any{"memories": list}, err
	case protocol.MethodSaveTool:
		var p protocol.SaveToolParams
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return r.Store.SaveTool(p)
	case protocol.MethodSavedTools:
		if err := decodeParams(method, params, &struct{}{}); err != nil {
			return nil, err
		}
		tools, problems, err := r.Store.SavedTools()
		return map[string]any{"tools": tools, "problems": problems}, err
	case protocol.MethodDeleteTool:
		var p protocol.NameParams
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		ok, err := r.Store.DeleteTool(p.Name)
		return map[string]bool{"deleted": ok}, err
	}
	return nil, fmt.Errorf("store: unknown method %q", method)
}

// userToolDocs are the saved tools as searchable tools of the pseudo-server
// user_tools; a store failure gives none, with a warning.
func (r *Router) userToolDocs() ([]ToolInfo, string) {
	if r.Store == nil {
		return nil, ""
	}
	tools, _, err := r.Store.SavedTools()
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

// DiscoveredNames lists every configured server, in config order, for
// MCP_DISCOVERED_SERVERS; nil when the catalog cannot be had.
func (r *Router) DiscoveredNames(ctx context.Context) []string {
	cat, err := r.Snapshot(ctx)
	if err != nil {
		return nil
	}
	return cat.Names()
}
