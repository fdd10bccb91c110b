// Package actors is the bridge's running part: one suture service per
// concern, each owning its state and reached only through its methods
// (which send it a message) or immutable snapshots. The engine builds and
// wires them; actors import protocol (the sandbox link's frames),
// protocol/result (a run's outcome) and the pure libraries under protocol
// (alias, search, schema: the catalog's aliases, search and argument
// checks), never the engine.
//
// # Supervision tree
//
//	bridge (root supervisor, engine.root)
//	├── front          Front: the stdio MCP server; a failure ends the process (SUP-3)
//	├── discovery      Discovery: loads, checks and reloads the configuration
//	├── router         Router: builds and publishes catalogs; answers box→host requests
//	├── servers        supervisor
//	│   ├── servers    Servers: the manager; a keyed map (serviceMap) of the children below
//	│   └── server:NAME  supervisor per configured server
//	│       └── client:NAME  Client: starts, keeps and restarts one MCP server
//	├── sessions       supervisor
//	│   ├── sessions   Sessions: the manager; a keyed map of the sessions, the spare container
//	│   └── session:NAME  Session: runs one session's calls on its sandbox, one at a time
//	├── runtime-probe  engine/container's Launcher: probes the runtime once (not with engine/local)
//	└── reaper         Reaper: ticks the sessions; sweeps leftovers of dead bridges
//
// A session's state outlives its sandbox (durable.go): the sandbox uploads
// snapshots of it to SandboxConfig.Snapshots (engine/snapshot behind the
// engine's adapter), and a new sandbox's first call offers the stored one,
// which the sandbox loads itself. The host never reads a snapshot.
//
// A sandbox (sandbox.go) is not a service: its Session starts and closes it,
// and its goroutines (link reader, request handlers, link watch) and its
// backend's are stopped and waited for by its close.
//
// # Sandbox backends
//
// A Launcher is a sandbox backend: Start(ctx, session) returns a Sandbox,
// which gives the link (a Link: frames both ways, writes with a deadline),
// Exited and ExitCode, Logs (what the box wrote outside the link, for start
// errors), HangUp (the polite stop), Kill, Remove (what a stopped box leaves
// behind) and Release. The sandbox actor decides when each is called and
// bounds every wait; how a box runs is the backend's business.
// engine/container runs the podman or docker CLI as a local child that dies
// with the bridge, its link a socket on fd 3 or its stdio, plus a watchdog
// that removes the container should the bridge die; engine/local (tests
// only) runs python3 on the host. A backend with no local process (a
// Kubernetes pod) implements the same two interfaces.
//
// Child processes (a backend's CLI, stdio MCP servers) run through
// actors/childproc: own process group, death with the bridge (a
// parent-death signal on Linux, the parent watcher elsewhere), owned pipes
// and a capped stderr tail. It holds no actor, so cmd may import it.
//
// # Upstream servers' frames
//
// What a proxied server sends is not trusted (issue 34). A stdio server is
// spoken to through actors/mcpwire's Transport, and an HTTP or SSE server's
// response bodies pass its HTTPFilter before mcp-go reads them: frames are
// capped, a reply the bridge cannot use ends its own call at once with a
// BadReplyError, and invalid UTF-8 is replaced. The catalog keeps out the
// tools/list entries the bridge cannot use (toolentry.go); doctor and
// describe_server name them.
//
// # Messages
//
// A run_python call runs on the MCP request's goroutine through the
// Dispatcher:
//
//	front → Dispatcher.Run
//	      → Discovery.Check           (ask on checks; RLD-1)
//	      → Router.Snapshot           (an atomic load; one catalog per call)
//	      → Router.Resolve            (against that catalog)
//	         → Client.Ready per granted server (ask on uses)
//	      → Sessions.Get              (ask on gets)
//	      → Session.Exec              (unbuffered requests; handed on once Done)
//	      ← ExecRequest.Reply         (1-buffered; exactly one result.Result)
//
// ask (ask.go) is the one request/reply round trip: it sends a request with
// a 1-buffered reply channel on an actor's unbuffered mailbox, selecting on
// the caller's ctx and on the actor's done channel (closed once it takes no
// more requests), then waits for the answer or ctx. An actor answers every
// request it received, exactly once.
//
// While a call runs, the sandbox's box→host requests arrive on jsonrpc2
// goroutines and go through the one method table (methods.go):
//
//	sandbox → Router.ServeSandbox → Router.Snapshot → Client.Call (on the caller's goroutine;
//	          no message to the router)
//
// Every such request, and every approval decision, is also told to the
// call's CallRecorder when its context carries one (recorder.go; the
// engine's audit trail): ServeSandbox is the one place requests pass, so
// the recorder sees them all without any handler knowing. The Dispatcher's
// Audit hook attaches it per call; Router.History answers runtime.history.
// The same door begins each request's span (trace.go), under the call's
// span, which the front begins and Scope carries; the upstream request's
// span, and its trace context in _meta and headers, are serverConn's
// (requestID). The spans come from the global TracerProvider: actors never
// import the SDK.
//
// Router.Resolve builds each granted server's entry for the sandbox once
// per tool list (grants.go), with a digest of its content, and each
// sandbox mirrors the entries its worker keeps (those of the exec frame
// before), so a frame names a kept entry by digest alone. A worker that
// lacks one answers CodeStaleServers before it runs anything, and the
// Session sends the frame again in full.
//
// The policy (policy.go, policyprincipal.go) is read-mostly state in the
// catalog: each call reads the top level's rules and its principal's, and
// every key of the principal's can only narrow.
//
// A call_tool's arguments are checked on that goroutine before anything is
// sent (CatalogServer.validate: names, then JSON Schema, a checker built
// once per tool of the snapshot). It is the only check: the sandbox's
// proxies leave every name to it, so no sandbox code skips it and the
// proxy and runtime.call_tool get one message.
//
// A server whose config says "identity": "principal" (bridge serve) has a
// client per (server, principal) pair besides its own (identities.go): a
// principal's calls, tool docs and resources go through CatalogServer's
// clientFor, a map lookup under the pool's lock, never a round trip to an
// actor. Each pair's spec (ServerSpec.ForPrincipal) carries that
// principal's sign-in only; the pairs run under the server's supervisor, at
// most MaxIdentityConns of them, and their tool lists join the server's
// catalog (unionTools). runtime.signins() and signout() reach the
// engine's SignIns (signins.go).
//
// A tool that requires a task goes through Client.CallTask (tasks.go), whose
// one helper goroutine (the blocking tasks/result) ends with the call; the
// resources methods (resources.go) go through Client.roundTrip like Call.
// A server of the 2026-07-28 generation is reached with server/discover
// and its era kept in the catalog (era.go, Client.reach); roundTrip then
// follows its input_required rounds and tasks (mrtr.go) on the caller's
// goroutine, and its subscriptions/listen stream is a goroutine of the
// connection's wait group, ended with the connection.
// search_tool_docs asks the clients of the servers still starting for their
// connection (ask on uses), one after another against one 2 s deadline for
// the whole search (methods.go's awaitStarting), and the activeCall keeps
// the call's tool calls in flight, which a timeout's error names.
//
// Between actors:
//
//	Discovery → Servers.Apply   (ask on applies; returns once the router published
//	                             the new configuration's catalog)
//	Client    → Servers.onTools (mailbox under mu + 1-buffered ping; never blocks)
//	Servers   → Router.publish  (a catalog source, 1-buffered, latest wins; the router
//	                             builds it and stores it in an atomic pointer)
//	Session   → Sessions.takeSpare (ask on spares)
//	Reaper    → Sessions.Tick → Session ticks (1-buffered, drops when full)
//	Sessions  → Session evicts  (ask; a session already Done counts as evicted)
//	Servers   → Client.retire, then removes its supervisor (RLD-3) without
//	            waiting: the servers supervisor waits for it at shutdown
//
// # Who owns what
//
// Each actor's fields under "Owned by the Serve goroutine" are read and
// written by its Serve alone:
//
//   - Router: builds each catalog and publishes it through an atomic
//     pointer. A catalog is immutable once published; readers load it
//     without a message to the actor.
//   - Servers: the configuration, the policy, the live servers and their
//     tools, the removed clients still stopping. Its mailbox is shared with
//     the clients under mu.
//   - Client: the connection, the waiters of a start, the backoff and its
//     timers. Serve resets them on every run, so a restart after a panic
//     starts clean. Its loop (clientloop.go) is one named step per event;
//     the start, watch and refresh goroutines report typed events.
//     Client.after is set by Servers before the client runs: a client
//     replacing one of the same name starts no process before the old
//     one's is dead (Client.stopped).
//     Client.removed is written by Servers (retire) and read by callers;
//     serverConn.inflight is written by callers and read by Serve.
//   - Sessions: the live sessions, the spare, the names' loss reasons. A
//     principal with no live session at the global cap may end the least
//     recently used idle session of the principal holding the most.
//   - Session: its sandbox, its call queue (callQueue: arrival order, one
//     timer on the earliest deadline), its call counter, an unreported state
//     loss. Its request channel is unbuffered: Serve answers every request
//     it received, and writes stopped before it closes done, after which it
//     receives no more; Exec, seeing done, hands its request to the
//     replacement session (evicted) or answers it (shutdown).
//   - sandbox: the active call (an atomic pointer, shared with the link's
//     goroutines; its output under activeCall.mu), and the mirror of the
//     server entries its worker keeps (keptEntries, under its own lock).
//   - Discovery: the config stamp and the file watcher.
//
// Every goroutine an actor starts is waited for before its Serve returns.
//
// # Panics
//
// suture recovers a panicking Serve and runs it again. The goroutines beside
// the actors that handle what a server or a sandbox sent (a client's start,
// watch and refresh, its notification and relay handlers, the tasks helper,
// a sandbox link's handlers) defer guard (guard.go): a panic there is logged
// once with its stack and fails that start or ends that server connection
// (serverConn.abort; the client starts the server again after its backoff),
// or ends that sandbox (sandbox.fail; the next call gets a fresh one), never
// the process.
package actors
