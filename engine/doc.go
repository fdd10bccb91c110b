// Package engine wires the bridge: it reads the environment, builds the
// actors (package actors) and their supervision tree, and gives them the
// host-side parts they need through the interfaces actors declare.
//
// Imports flow cmd → engine → actors → protocol; nothing below imports the
// engine.
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
//   - The servers' host parts: servers.go (what the servers actors get
//     from the engine), catalogstore.go (actors.CatalogStore on disk),
//     schema.go (input schemas and signatures), children.go
//     (actors.ChildRegistry on disk), policy.go (the policy file).
//   - The run_python tool entry: tool.go, inventory.go.
//
// # Sub-packages
//
// Libraries, which import only protocol, protocol/result or each other,
// never the engine or the actors: config (server config files and aliases), search (BM25
// and fuzzy tool search), store (memory and saved tools on disk), toon
// (the TOON encoding), render (a run's result as an MCP tool result).
//
// Standalone tools behind bridge subcommands: bench (bridge bench), image
// (bridge image build).
//
// The run's result type itself is protocol/result: the actors produce it,
// render and bridge exec read it.
package engine
