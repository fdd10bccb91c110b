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
//   - engine: the wiring (this package) and the host parts the actors use.
//   - actors: the running services, each owning its state.
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
//   - The wiring: engine.go (New, Serve, Exec, the supervisor spec),
//     events.go (supervisor events in the log), env.go (MCP_BRIDGE_*),
//     doctor.go and doctor_runtime.go (bridge doctor).
//   - The container launcher, which implements actors.Launcher:
//     container.go (the run argv), runtime.go (runtime resolution and
//     facts), seccomp.go, idmap.go, mounts.go, owner.go, rundir.go,
//     spill.go, sweep.go (what dead bridges left), proc.go (/proc).
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
// Standalone tools behind bridge subcommands: bench (bridge bench), image
// (bridge image build).
//
// The run's result type itself is protocol/result: the actors produce it,
// render and bridge exec read it.
package engine
