// Package snapshot is the host's store of session snapshots: the Python
// state of a bridge session, pickled inside the sandbox and uploaded to the
// host as opaque bytes. The store keeps, verifies, ages and drops those
// bytes; it never interprets them. Unpickling happens only inside a sandbox,
// so nothing here parses, decodes or executes snapshot data.
//
// # What is stored
//
// At most one snapshot per (principal, session): principal is "" under
// stdio. A snapshot is the data the sandbox sent plus a Meta kept in a JSON
// sidecar: which call's state it holds, when it was taken, its size, what
// the sandbox reported about it (names, files, what it left out, the image)
// and a MAC. A new Commit for the same session replaces the old snapshot.
//
// # File layout
//
// Everything lives flat in the directory given to Open (the bridge passes
// <state>/.bridge/sessions), created 0700; every file is 0600:
//
//	<id>.snap             the data, exactly as the sandbox sent it
//	<id>.json             the sidecar (Meta)
//	<id>.lock             the flock file of the pair; it stays on disk
//	<id>.snap.tmp-<n>     a snapshot being written (Writer)
//	<id>.json.tmp-<n>     a sidecar being replaced
//
// id is the first 32 hex digits of
// sha256("bridge-session\x00" + principal + "\x00" + session). Session and
// principal text never appears in a path, so any session name ("../x",
// "a/b", "") is safe. A principal may not hold a NUL byte (every call that
// takes one refuses it): with NUL-free principals the hashed string, and so
// the id, is distinct for every (principal, session) pair, whatever the
// session holds. Files that do not match these names are left alone.
//
// # Writing and reading
//
// Create returns a Writer that streams into a temp file, keeping a running
// MAC and byte count; it fails with ErrOverCap as soon as the total would
// pass Caps.PerSession, and removes the temp file then. Commit renames the
// temp file over <id>.snap and replaces the sidecar (temp file + rename),
// both under an exclusive flock of <id>.lock, so a reader that takes the
// same lock always sees a matching pair, also across processes (a bridge
// serve and a bridge exec may share the directory).
//
// Store.Open reads the whole data file once, streaming, and checks it
// against the sidecar before it returns a Reader; anything that does not
// verify is removed and reported as ErrTampered. The Reader keeps the file
// descriptor it verified: a later Commit renames a new file into place and
// never writes into the old one, so an open Reader keeps reading the bytes
// it checked.
//
// # The MAC
//
// Meta.MAC is the hex HMAC-SHA256, under the key from LoadKey, of
//
//	"bridge-snapshot-v1\x00" + principal + "\x00" + session + "\x00" +
//	data + "\x00" + decimal Bytes + "\x00" + decimal Call + "\x00" +
//	decimal Taken.UnixNano()
//
// The data comes before the fields that are only known at Commit so that the
// Writer can compute the MAC while the bytes stream through, without reading
// the file again. Bytes, in the trailer, fixes where the data ends, so the
// encoding is unambiguous even when a session name holds NUL bytes.
//
// It detects: data edited, truncated or extended; a sidecar whose Principal,
// Session, Call, Taken or Bytes was edited; a pair moved or copied to another
// session's or principal's file names (the sidecar names the wrong session,
// or, edited to name the right one, no longer matches its MAC); a snapshot
// made up without the key.
//
// It does not detect, and is not meant to stop:
//
//   - anyone who can read the key file: they can forge any snapshot. The key
//     guards against edits by things that can write the sessions directory
//     but not read the key, and against accidents (truncation, a stray copy);
//     it is not a boundary against the user who runs the bridge.
//   - a rollback: a pair copied back from an older, genuine snapshot of the
//     same session verifies, because the MAC binds Call and Taken to the
//     data but nothing records which call is the newest.
//   - edits to LastCall and Used, bookkeeping kept outside the MAC because it
//     is rewritten without the data; it only steers notes, eviction and
//     retention.
//   - deletion: a removed pair looks like no snapshot at all.
//   - a malicious sandbox: the sandbox made the bytes, and the MAC only says
//     they are the bytes it sent. That is why they are only ever unpickled
//     inside a sandbox.
//   - changes written into the data file in place after Open verified it.
//
// The data is not encrypted; the 0700 directory and 0600 files keep other
// users out.
//
// # Caps and sweeping
//
// Caps.PerSession bounds one snapshot, Caps.Total all of them (the sum of
// the sidecars' Bytes): after each Commit the least recently used snapshots
// (by Meta.Used, which Commit and Open set) are dropped, across principals,
// until the rest fit, never the one just committed. Sweep, run by Open and
// meant to be run now and then, also drops snapshots unused for
// Caps.Retention, temp files untouched for an hour, and broken pairs (a
// sidecar that does not parse, names another id or disagrees with the data's
// size, or half of a pair). Each drop is logged at info with the id only;
// the session and principal names are logged at debug.
package snapshot
