// Package engine wires the bridge: it reads the environment, builds the
// actors (package actors) and their supervision tree, and gives them the
// host-side parts they need through the interfaces actors declare.
//
// Imports flow cmd → engine → actors → protocol; nothing below imports the
// engine, and protocol and its sub-packages import neither the engine nor
// the actors.
//
// # Where things live
//
//   - cmd/bridge: the CLI (bridge run, exec, doctor, bench, image).
//   - engine: the wiring (this package), doctor and the host parts the
//     actors use.
//   - Sandbox backends, which implement actors.Launcher, under engine:
//     container (podman and docker) and local (tests only). Each takes
//     only the settings it reads (container.Config, built by
//     Env.ContainerConfig), not the whole Env.
//   - actors: the running services, each owning its state; actors/childproc
//     runs child processes (no actor: cmd uses its parent watcher).
//   - protocol: the wire types of the host↔sandbox link; protocol/result is
//     a run's outcome.
//   - Pure libraries the actors use, under protocol: alias (server and tool
//     aliases), search (BM25 and fuzzy tool search, "Did you mean"), schema
//     (input-schema validation and Python-style signatures).
//   - Libraries only the engine and cmd use, under engine: config, store,
//     toon, render (below).
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
//     (actors.ChildRegistry on disk), policy.go (the policy file).
//   - The run_python tool entry: tool.go, inventory.go.
//
// # Sub-packages
//
// Libraries, which import only protocol, its sub-packages or each other,
// never the engine or the actors: config (server config files), store
// (memory and saved tools on disk), toon (the TOON encoding), render (a
// run's result as an MCP tool result).
//
// Sandbox backends import actors (the interfaces they implement),
// actors/childproc, entrypoint and owner, never the engine or each other:
// container (the run argv with every confinement flag, runtime and OCI
// runtime choice, seccomp profile, id maps, mounts, removal with a
// watchdog, the sweep of dead bridges' containers) and local.
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
