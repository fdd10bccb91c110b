package actors

// grants.go: what a granted server is to the sandbox (protocol.Server),
// built once per tool list rather than once per call, and which of those
// entries a sandbox already keeps, so an exec frame names them by digest.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// grantEntries holds each server's protocol.Server for its current tool
// list. Read-mostly: a call reads the entry of each server it grants, and
// an entry is rebuilt only when the server's tool list (a new slice on
// every list) or its alias or description changed.
type grantEntries struct {
	mu sync.Mutex
	m  map[string]grantEntry // by server name
}

type grantEntry struct {
	client      *Client
	first       *ToolInfo // the tool list's first element: its identity
	n           int
	alias, desc string
	server      protocol.Server
}

// server returns the entry of a live server with tools, building it when
// it is not current. The entry's slices are shared: read only.
func (g *grantEntries) server(spec ServerSpec, client *Client, tools []ToolInfo) protocol.Server {
	var first *ToolInfo
	if len(tools) > 0 {
		first = &tools[0]
	}
	g.mu.Lock()
	e, ok := g.m[spec.Name]
	g.mu.Unlock()
	if ok && e.client == client && e.first == first && e.n == len(tools) && e.alias == spec.Alias && e.desc == spec.Description {
		return e.server
	}
	ps := newCatalogServer(spec, client, tools, true).protocolServer()
	ps.Digest = digest(ps)
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]grantEntry{}
	}
	g.m[spec.Name] = grantEntry{client: client, first: first, n: len(tools), alias: spec.Alias, desc: spec.Description, server: ps}
	g.mu.Unlock()
	return ps
}

// digest names a server entry by its content.
func digest(ps protocol.Server) string {
	raw, err := json.Marshal(ps)
	if err != nil {
		return "" // not kept: sent in full every call
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

// keptEntries mirrors the server entries a sandbox's worker keeps: exactly
// those of the last exec frame sent to it (entrypoint's _begin_call keeps
// no others). A mirror that is wrong costs one resend: the worker answers
// CodeStaleServers before running the cell, and the host forgets and sends
// the frame again in full.
type keptEntries struct {
	mu      sync.Mutex
	digests map[string]bool
}

// frame returns servers as the next exec frame carries them: an entry the
// worker keeps goes as a reference to its digest.
func (k *keptEntries) frame(servers []protocol.Server) []protocol.Server {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []protocol.Server
	for i, s := range servers {
		if s.Digest == "" || !k.digests[s.Digest] {
			continue
		}
		if out == nil {
			out = append([]protocol.Server(nil), servers...)
		}
		out[i] = protocol.Server{Name: s.Name, Alias: s.Alias, Digest: s.Digest, Cached: true}
	}
	if out == nil {
		return servers
	}
	return out
}

// sent records the servers of an exec frame that left.
func (k *keptEntries) sent(servers []protocol.Server) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.digests = make(map[string]bool, len(servers))
	for _, s := range servers {
		if s.Digest != "" {
			k.digests[s.Digest] = true
		}
	}
}

// forget clears the mirror: the next frame sends every entry in full.
func (k *keptEntries) forget() { k.sent(nil) }

// isStaleServers says err is the worker's answer to a frame naming an
// entry it does not keep.
func isStaleServers(err error) bool {
	var e *jsonrpc2.Error
	return errors.As(err, &e) && e.Code == protocol.CodeStaleServers
}

// GrantEntry is the sandbox's entry for server spec with tools, as a live
// call's grant builds it, for a caller that starts no server (bridge
// replay, from the disk's catalog).
func GrantEntry(spec ServerSpec, tools []ToolInfo) protocol.Server {
	ps := newCatalogServer(spec, nil, tools, true).protocolServer()
	ps.Digest = digest(ps)
	return ps
}
