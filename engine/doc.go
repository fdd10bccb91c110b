// Package engine wires the bridge: it reads the environment, builds the
// actors (package actors) and their supervision tree, and gives them the
// host-side parts they need through the interfaces actors declare.
//
// Imports flow cmd → engine → actors → protocol; nothing below imports the
// engine, and protocol and its sub-packages import neither the engine nor
// the actors. cmd imports no actor (actors/childproc only): what it needs of
// them, the engine names (human.go). cmd/bridge's TestLayering holds all of
// this.
//
// # Where things live
//
//   - cmd/bridge: the CLI (bridge run, serve, exec, doctor, auth, bench,
//     image, kubernetes).
//   - engine: the wiring (this package), doctor and the host parts the
//     actors use.
//   - Sandbox backends, which implement actors.Launcher, under engine:
//     container (podman and docker), kube (a Pod per sandbox) and local
//     (tests only). Each takes only the settings it reads
//     (container.Config, built by Env.ContainerConfig; kube.Config, by
//     env_kube.go), not the whole Env.
//   - actors: the running services, each owning its state; actors/childproc
//     runs child processes (no actor: cmd uses its parent watcher);
//     actors/mcpwire reads what upstream MCP servers send (the stdio
//     transport, the HTTP body filter).
//   - protocol: the wire types of the host↔sandbox link; protocol/result is
//     a run's outcome.
//   - Pure libraries the actors use, under protocol: alias (server and tool
//     aliases), search (BM25 and fuzzy tool search, "Did you mean"), schema
//     (input-schema validation and Python-style signatures).
//   - Libraries only the engine and cmd use, under engine: config, store,
//     snapshot, audit, toon, render, oauth, httpd, fileperm (below).
//   - Tools behind subcommands, under engine: bench, image (below).
//   - entrypoint: the Python that runs inside the sandbox.
//
// # The engine's own files
//
//   - The wiring: engine.go (New, Serve, Exec, the supervisor spec; it picks
//     the sandbox backend from MCP_BRIDGE_RUNTIME), events.go (supervisor
//     events in the log), env.go (MCP_BRIDGE_*), manual.go (the manual's
//     mount line), doctor.go and doctor_runtime.go (bridge doctor), spill.go
//     (bridge exec's copy of a spilled output).
//   - The servers' host parts: servers.go (server specs from the config),
//     catalogstore.go (actors.CatalogStore on disk), children.go
//     (actors.ChildRegistry on disk), policy.go (the policy file), auth.go
//     (OAuth sign-in for http servers: bridge auth, and sign-in during a
//     call through the client or bridge exec's terminal), identity.go
//     ("identity": "principal" under bridge serve: each principal's own
//     token store and sign-in through their client, serve's
//     /oauth/callback on --public-url, the key that seals token files).
//   - The run_python tool entry: tool.go, inventory.go.
//   - bridge serve: serve.go (mcp-go's streamable HTTP server behind
//     engine/httpd, each call as its principal), servecalls.go (a
//     principal's sessions, store and grants), callgate.go (calls in flight
//     per principal, and sharing between principals), leader.go (--leader-elect:
//     a standby starts its actors only once it holds the leader Lease; a
//     leader that lost it is fenced and exits).
//   - The kubernetes backend's settings: env_kube.go
//     (MCP_BRIDGE_K8S_*, kube.Config); deployconfig.go checks the servers
//     and policy files of `bridge kubernetes manifests` as the bridge in
//     the pod will load them.
//   - human.go: the actors' Human, named for cmd (bridge exec's terminal
//     answers approvals).
//   - durable.go: sessions that survive: opens engine/snapshot with the
//     key of MCP_BRIDGE_KEY_FILE, adapts it to actors.SnapshotStore, and
//     doctor's sessions line.
//   - auditcalls.go: the audit trail: opens engine/audit (on under bridge
//     serve, MCP_BRIDGE_AUDIT), begins a record per call through the
//     Dispatcher's Audit hook, collects its inner requests and approvals as
//     the call's actors.CallRecorder, and appends it when the call ends.
//   - traces.go: OpenTelemetry traces: when OTEL_* asks (env.go's
//     readTraces), the SDK's TracerProvider over the OTLP exporter, set as
//     the global provider the actors' spans come from; values for
//     MCP_BRIDGE_TRACE_VALUES through the audit trail's redactor; the
//     flush at exit, bounded to 2 s.
//   - replay.go, replaymatch.go: bridge replay: a recorded call run again
//     with only the sessions and the runtime, its sandbox's requests
//     answered from the audit record by a RequestRouter of its own.
//
// # Sub-packages
//
// Libraries, which import only protocol, its sub-packages or each other,
// never the engine or the actors: config (server config files), store
// (memory and saved tools on disk), snapshot (sessions' snapshots on disk,
// signed and capped; it imports store), audit (the audit trail: chained
// records on disk, their verification and reading), toon (the TOON encoding), render (a
// run's result as an MCP tool result), oauth (OAuth 2.1 sign-in to remote
// servers: discovery, registration, PKCE, refresh, the token store; it
// imports config), fileperm (which permissions of a secret file reach
// others; httpd's tokens check and snapshot's key check share it).
//
// httpd is bridge serve's HTTP side (bearer tokens and their revocation,
// the middleware in front of mcp-go's streamable HTTP server: the Origin
// and Host checks of every endpoint, the read deadline until a token is
// checked, refusals that close their connection, the per-address cap on
// connections; TLS reload, Prometheus metrics and who may read them); it
// imports actors for the principal a request carries, and knows nothing of
// sessions or sandboxes.
//
// Sandbox backends import actors (the interfaces they implement),
// actors/childproc, entrypoint and owner, never the engine or each other:
// container (the run argv with every confinement flag, runtime and OCI
// runtime choice, seccomp profile, id maps, mounts and who writes them (Writer), removal with a
// watchdog, the sweep of dead bridges' containers), kube (a Pod per
// sandbox through client-go, its link over the API server's attach, a warm
// pool, the Lease and the sweep of dead bridges' pods) and local.
//
// Host helpers: owner (this bridge's bridge.owner label, whether another
// bridge or process lives, /proc), used by container and children.go.
//
// Standalone tools behind bridge subcommands: bench (bridge bench), image
// (bridge image build). cmd hands them the container launcher's argv
// (VerifyArgs, SocketLinkArgs, GlobalArgs).
//
// The run's result type itself is protocol/result: the actors produce it,
// render and bridge exec read it.
package engine
