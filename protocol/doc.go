// Package protocol defines the host↔sandbox link (SPEC §7): JSON-RPC 2.0,
// one message per line over the container's stdin and stdout. It imports no
// other package of the bridge; the actors speak it, the entrypoint
// (entrypoint/*.py) is its other end.
//
// # Frames
//
// host → box:
//
//   - boot BootParams (notification): the files, the entrypoint and the
//     limits; the box answers with ready ReadyParams (notification).
//   - exec ExecParams (request) → ExecResult: one run_python call.
//   - interrupt (notification): stop the running cell (TMO-2).
//   - shutdown (notification): exit. The host closes stdin instead, which
//     the box treats as the same frame.
//   - snapshot SnapshotParams (request) → the snapshot's summary: take one
//     now and upload it (durability on exit, before a polite close).
//
// A new sandbox's first exec may carry Restore: the session's snapshot,
// which the box reads (snapshot_read) and loads before the code runs.
//
// box → host notifications during an exec: output (a chunk of stdout or
// stderr), image (a figure or display()ed image), progress. The output not
// yet streamed when a cell ends rides in its ExecResult (Output) instead,
// after every output notification of the call.
//
// box → host at any time, only when the boot frame's limits set linkWindow
// (a Kubernetes attach): ack AckParams (notification), the bytes of the
// link read so far (credit.go).
//
// box → host requests during an exec, answered by the router through one
// method table (actors/methods.go):
//
//   - discovered_servers, list_servers, describe_server, list_tools,
//     query_tool_docs, search_tool_docs, suggest_tools: the catalog
//   - call_tool {server, tool, arguments, alias?, validate?}: a proxied
//     tool call, for servers the call grants; server and tool may be
//     names or aliases, and validate false skips the argument check
//   - reset: the session's state is dropped after this call
//   - job_scope {} → {token}: the token a background job started in this
//     call sends as the meta {"job": token} of its requests; the host serves
//     them with this call's grant and tool-call count, whenever they come,
//     until the sandbox ends. Unknown tokens are refused.
//   - memory_get, memory_put, memory_delete, memory_list, save_tool,
//     saved_tools, delete_tool: the host's persistent store
//   - history {n} → {records, note?}: runtime.history(n), the principal's
//     last n calls (MaxHistory at most) from the audit trail, oldest
//     first; with the trail off, none and a note saying so
//   - signins {} → {signins: [{server, state, scope?, expires?}]}:
//     runtime.signins(), the principal's own sign-ins to identity: principal
//     servers (bridge serve), never a token; empty elsewhere
//   - signout {server} → {signed_out}: runtime.signout(server) forgets the
//     principal's tokens for that server and closes their connection to it;
//     refused for an unknown server, a shared one, and outside bridge serve
//
// box → host requests at any time, answered by the sandbox actor for the
// session that holds the box (actors/durable.go), with or without a call:
//
//   - snapshot_begin {call, session?} → {upload, chunk}, data frames "#W
//     <upload> <offset> <n>" and n bytes (stream.go), snapshot_write {upload,
//     offset} to check them now and then, snapshot_end {upload, call, cell, names,
//     files, left, taken, python} → {bytes}, snapshot_abort {upload}: one
//     upload of the session's snapshot at a time, in order, each write at
//     most chunk bytes; session names a new session of
//     the same principal to create (fork_session)
//   - snapshot_read {offset, length} → {data}: the snapshot the exec's
//     Restore offers
//
// Errors carry data.kind (ErrorData; LNK-6). Frames over the link's cap are
// refused (LNK-4); stream.go reads lines with that cap.
//
// # Sub-packages
//
// The run's outcome as it leaves the actors is protocol/result. The pure
// libraries the actors use live beside it, so the actors need not import
// the engine: alias (server and tool aliases, §9.3), search (tool search
// and "Did you mean" suggestions, §9.5) and schema (input-schema checks and
// Python-style signatures, PXY-6). Like this package, they import no other
// part of the bridge.
package protocol
