package protocol

import "encoding/json"

// Method names of the host↔sandbox link; doc.go describes each one.
//
// Besides the discovery, docs and tool-call methods, the sandbox reaches the
// host's persistent store through these box→host requests; the store lives
// under <state>/.bridge/ on the host, never in a mount, so it outlives
// containers, sessions and bridge processes:
//
//   - memory_get {key} → MemoryRecord (found false when absent)
//   - memory_put MemoryPutParams → MemoryPutResult; with rev set, the write
//     happens only when the key's current rev equals it ("" = absent), else
//     the error kind is "conflict" (update_memory retries)
//   - memory_delete {key} → {deleted}
//   - memory_list MemoryListParams → MemoryListResult: one page, sorted by
//     key; the sandbox asks again with after = next until next is empty
//   - save_tool SaveToolParams → SavedTool (without source)
//   - saved_tools {} → {tools: [SavedTool], problems: [string]}
//   - delete_tool {name} → {deleted}
//
// Store errors carry kind "invalid_arguments" (bad key, value over a cap),
// "conflict" or "server_error" (the disk failed).
const (
	MethodBoot      = "boot"
	MethodReady     = "ready"
	MethodExec      = "exec"
	MethodInterrupt = "interrupt"
	MethodShutdown  = "shutdown"
	MethodOutput    = "output"
	MethodImage     = "image"
	MethodProgress  = "progress"

	MethodListServers       = "list_servers"
	MethodDiscoveredServers = "discovered_servers"
	MethodDescribeServer    = "describe_server"
	MethodListTools         = "list_tools"
	MethodCallTool          = "call_tool"
	MethodQueryToolDocs     = "query_tool_docs"
	MethodSearchToolDocs    = "search_tool_docs"
	MethodSuggestTools      = "suggest_tools"
	MethodReset             = "reset"
	MethodSaveTool          = "save_tool"
	// MethodJobScope asks, during a call, for the token its background jobs
	// send in each request's meta ({"job": token}, JobMeta): the host then
	// serves them with that call's grant, whenever they come.
	MethodJobScope = "job_scope"

	// Snapshots of a session's state (durable.go in actors; doc.go): the
	// sandbox uploads one with begin, write (in order) and end, or abort;
	// a restoring sandbox reads the one its exec frame offers (Restore).
	// The host asks for one with MethodSnapshot (durability on exit).
	MethodSnapshotBegin = "snapshot_begin"
	MethodSnapshotWrite = "snapshot_write"
	MethodSnapshotEnd   = "snapshot_end"
	MethodSnapshotAbort = "snapshot_abort"
	MethodSnapshotRead  = "snapshot_read"
	MethodSnapshot      = "snapshot"

	MethodMemoryGet    = "memory_get"
	MethodMemoryPut    = "memory_put"
	MethodMemoryDelete = "memory_delete"
	MethodMemoryList   = "memory_list"
	MethodSavedTools   = "saved_tools"
	MethodDeleteTool   = "delete_tool"
	// MethodHistory is runtime.history(n): the principal's last calls from
	// the audit trail.
	MethodHistory = "history"
	// MethodSignIns is runtime.signins(): the principal's own upstream
	// sign-ins (identity: principal servers, bridge serve), never a token;
	// MethodSignOut (ServerParams) is runtime.signout(server): it forgets
	// the principal's tokens for that server.
	MethodSignIns = "signins"
	MethodSignOut = "signout"
)

// ServerParams names one server (signout).
type ServerParams struct {
	Server string `json:"server"`
}

// HistoryParams asks for the last N calls (MaxHistory at most).
type HistoryParams struct {
	N int `json:"n"`
}

// MaxHistory caps runtime.history(n).
const MaxHistory = 100

// JobMeta is the meta of a request from a background job: the token
// job_scope returned to the call that started it.
type JobMeta struct {
	Job string `json:"job"`
}

// JobScopeResult is job_scope's reply.
type JobScopeResult struct {
	Token string `json:"token"`
}

// Limits are the sandbox-side bounds sent in the boot frame.
type Limits struct {
	MaxFrameBytes  int `json:"maxFrameBytes"`
	MaxOutputBytes int `json:"maxOutputBytes"`
	MaxInFlight    int `json:"maxInFlight"`
	// MaxImages and MaxImageBytes cap the images one call attaches; the
	// sandbox saves the rest under /workspace and reports them in
	// ExecResult.Saved.
	MaxImages     int `json:"maxImages"`
	MaxImageBytes int `json:"maxImageBytes"`
	// LinkWindow, when set, asks the sandbox to acknowledge what it reads
	// (MethodAck), at least every quarter of this many bytes (credit.go).
	LinkWindow int `json:"linkWindow,omitempty"`
}

// BootParams is the first line the host writes to a new sandbox.
type BootParams struct {
	Files   map[string]string `json:"files"`
	Main    string            `json:"main"`
	Version string            `json:"version"`
	Limits  Limits            `json:"limits"`
	// RWMounts are the container paths of the read-write host folders
	// (MCP_BRIDGE_MOUNTS): a session's first result names each one its
	// user cannot write.
	RWMounts []string `json:"rwMounts,omitempty"`
	// Durability is MCP_BRIDGE_SESSION_DURABILITY ("cell", "exit", "off"):
	// when the sandbox snapshots its session. "off" when the host keeps
	// no snapshots.
	Durability string `json:"durability,omitempty"`
}

// ReadyParams reports that the sandbox has booted.
type ReadyParams struct {
	Python string `json:"python"`
	PID    int    `json:"pid"`
}

// Tool is one proxied tool as the sandbox sees it.
type Tool struct {
	Name         string          `json:"name"`
	Alias        string          `json:"alias"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// Server is one server granted to an exec call.
type Server struct {
	Name        string `json:"name"`
	Alias       string `json:"alias"`
	Description string `json:"description,omitempty"`
	Tools       []Tool `json:"tools"`
	// Error says why the server cannot be used (disabled, failed to start);
	// its tools, if any, come from its disk catalog and raise it.
	Error string `json:"error,omitempty"`
	// SignIn marks an Error that a sign-in may clear: the proxies then
	// send any tool name to the host, which signs in where the call can.
	SignIn bool `json:"signIn,omitempty"`
	// Digest names this entry (everything above it) across calls: the
	// sandbox keeps the proxies it built for the previous exec frame's
	// entries by digest. Empty: not kept.
	Digest string `json:"digest,omitempty"`
	// Cached says the entry is the one the previous exec frame sent under
	// Digest, so only Name, Alias and Digest come. A sandbox without it
	// answers the exec with CodeStaleServers before running anything, and
	// the host sends the frame again in full.
	Cached bool `json:"cached,omitempty"`
}

// ExecParams asks the sandbox to run one cell. Discovered lists every
// configured server name, in config order (MCP_DISCOVERED_SERVERS).
type ExecParams struct {
	Call        int64    `json:"call"`
	Code        string   `json:"code"`
	Servers     []Server `json:"servers"`
	OutputLimit int      `json:"outputLimit"`
	// Progress asks the sandbox for progress frames: the newest output
	// lines while the call prints more than the streamed head.
	Progress   bool     `json:"progress,omitempty"`
	Discovered []string `json:"discovered,omitempty"`
	// SavedTools is the saved_tools reply, sent with a sandbox's first
	// exec so its worker loads them without a round trip; absent, the
	// worker asks (its first cell only).
	SavedTools any `json:"savedTools,omitempty"`
	// Restore offers the session's snapshot to a new sandbox's first
	// cell, which loads it (snapshot_read) before the code runs.
	Restore *RestoreParams `json:"restore,omitempty"`
}

// RestoreParams describes the snapshot a new sandbox loads.
type RestoreParams struct {
	Session  string `json:"session"`
	Bytes    int64  `json:"bytes"`
	Call     int64  `json:"call"`     // the call whose state it holds
	LastCall int64  `json:"lastCall"` // the last call the session started
	Cell     int    `json:"cell"`     // the last cell number it holds: new cells go on after it
	// After is why the session's sandbox was replaced, when the host knows.
	After string `json:"after,omitempty"`
}

// SnapshotBeginParams starts an upload of the session's snapshot, taken
// at Call. Session, when set, names another session of the same principal
// to create from it (runtime.fork_session).
type SnapshotBeginParams struct {
	Call    int64   `json:"call"`
	Session *string `json:"session"`
}

// SnapshotBeginResult names the upload; Chunk caps each write's data.
type SnapshotBeginResult struct {
	Upload string `json:"upload"`
	Chunk  int    `json:"chunk"`
}

// SnapshotWriteParams checks an upload whose data the sandbox sends as
// data frames ("#W <upload> <offset> <n>" and n bytes, stream.go): it fails once
// the upload has (over the cap, out of order), and Offset must be the
// upload's size so far.
type SnapshotWriteParams struct {
	Upload string `json:"upload"`
	Offset int64  `json:"offset"`
}

// SnapshotEndParams completes an upload with what the sandbox counted.
type SnapshotEndParams struct {
	Upload string   `json:"upload"`
	Call   int64    `json:"call"`
	Cell   int      `json:"cell"`
	Names  int      `json:"names"`
	Files  int      `json:"files"`
	Left   []string `json:"left"`
	Taken  float64  `json:"taken"` // Unix seconds
	Python string   `json:"python"`
}

// SnapshotEndResult is the stored snapshot's size.
type SnapshotEndResult struct {
	Bytes int64 `json:"bytes"`
}

// UploadParams names an upload (snapshot_abort).
type UploadParams struct {
	Upload string `json:"upload"`
}

// SnapshotReadParams reads the offered snapshot at Offset.
type SnapshotReadParams struct {
	Offset int64 `json:"offset"`
	Length int   `json:"length"`
}

// SnapshotReadResult says how many bytes were read (fewer than asked only
// at the end). They come just before it as a data frame "#R <offset>
// <n>" and n bytes (stream.go); Data carries them only where there is no
// line stream (unit tests).
type SnapshotReadResult struct {
	Bytes int    `json:"bytes"`
	Data  []byte `json:"data,omitempty"`
}

// SnapshotParams asks the sandbox for a snapshot now (durability on exit),
// within Timeout seconds.
type SnapshotParams struct {
	Timeout float64 `json:"timeout"`
}

// Outcome values of ExecResult.
const (
	OutcomeOK          = "ok"
	OutcomeException   = "exception"
	OutcomeInterrupted = "interrupted"
	OutcomeExit        = "exit"
)

// ExecResult is the sandbox's reply to exec.
type ExecResult struct {
	Outcome     string  `json:"outcome"`
	ExitCode    int     `json:"exitCode"`
	Result      *string `json:"result,omitempty"`
	Error       string  `json:"error,omitempty"`
	Truncated   bool    `json:"truncated"`
	OutputBytes int64   `json:"outputBytes"`
	Reset       bool    `json:"reset"`
	// Notes are lines for the result's notes, such as a saved tool that
	// failed to load; the host keeps at most MaxNotes of MaxNoteBytes each.
	Notes []string `json:"notes,omitempty"`
	// Saved lists the images of the call that were not attached (over a
	// cap) and were written to files instead.
	Saved []SavedImage `json:"saved,omitempty"`
	// Output is the call's output not yet sent as output notifications
	// when the cell ended, in order, after theirs: a cell that prints
	// little needs no frame but its reply. The sandbox sends it as
	// notifications instead when the reply would be over the frame cap.
	Output []OutputChunk `json:"output,omitempty"`
}

// OutputChunk is a run of one stream's output in an ExecResult.
type OutputChunk struct {
	Stream string `json:"stream"`
	Data   string `json:"data"`
}

// SavedImage is an image the sandbox wrote to a file instead of attaching it.
type SavedImage struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`          // SavedOverBytes or SavedOverCount
	Error  string `json:"error,omitempty"` // why it was not saved; Path is then ""
}

// Reasons of SavedImage.
const (
	SavedOverBytes = "bytes"
	SavedOverCount = "count"
)

// ImageParams is one image of the active call (a figure, or display()),
// base64 in Data as MCP image content carries it.
type ImageParams struct {
	Call     int64  `json:"call"`
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

// ProgressParams carries the newest output lines of the active call, for
// progress notifications; it never counts as output.
type ProgressParams struct {
	Call int64  `json:"call"`
	Data string `json:"data"`
}

// Bounds of ExecResult.Notes as the host keeps them.
const (
	MaxNotes     = 16
	MaxNoteBytes = 1024
)

// CallParams names the call an interrupt is meant for.
type CallParams struct {
	Call int64 `json:"call"`
}

// OutputParams carries captured output of the active call.
type OutputParams struct {
	Call   int64  `json:"call"`
	Stream string `json:"stream"`
	Data   string `json:"data"`
}

// Error kinds carried in a link error's data.kind (LNK-6).
const (
	KindNotAvailable     = "not_available"
	KindTimeout          = "timeout"
	KindInvalidArguments = "invalid_arguments"
	KindServerError      = "server_error"
	KindTransport        = "transport"
	KindNotFound         = "not_found"
	KindConflict         = "conflict"
	// KindDenied: a human (or the lack of one to ask) refused a gated call.
	KindDenied = "denied"
)

// Error codes of link errors: the range -32000..-32019 (LNK-6), plus the
// JSON-RPC codes for unknown methods and invalid params (LNK-3), and for
// frames that cannot be decoded (parse error, or invalid request when the
// frame's id can still be read).
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeNotAvailable     = -32000
	CodeTimeout          = -32001
	CodeInvalidArguments = -32002
	CodeServerError      = -32003
	CodeTransport        = -32004
	CodeNotFound         = -32005
	CodeConflict         = -32006
	CodeDenied           = -32007
	// CodeStaleServers answers an exec frame that names a Cached server
	// entry the sandbox does not have; the cell did not run.
	CodeStaleServers   = -32008
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
)

// ErrorData is the data member of a link error.
type ErrorData struct {
	Kind string `json:"kind"`
}

// KeyParams names one memory key (memory_get, memory_delete).
type KeyParams struct {
	Key string `json:"key"`
}

// NameParams names one saved tool (delete_tool).
type NameParams struct {
	Name string `json:"name"`
}

// MemoryInfo describes one stored memory; times are Unix seconds.
type MemoryInfo struct {
	Key       string          `json:"key"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt float64         `json:"created_at"`
	UpdatedAt float64         `json:"updated_at"`
	Size      int             `json:"size"`
}

// MemoryListParams asks for the memories whose keys sort after After (""
// for the first page).
type MemoryListParams struct {
	After string `json:"after,omitempty"`
}

// MemoryListResult is one page of memory_list, sorted by key; Next, when
// set, is the After of the next page. Pages keep the reply within one
// frame however many keys and how much metadata there are.
type MemoryListResult struct {
	Memories []MemoryInfo `json:"memories"`
	Next     string       `json:"next,omitempty"`
}

// MemoryRecord is memory_get's result: Found is false for an absent key,
// and Rev identifies the stored write for a conditional memory_put.
type MemoryRecord struct {
	Found bool            `json:"found"`
	Value json.RawMessage `json:"value,omitempty"`
	Rev   string          `json:"rev"`
	MemoryInfo
}

// MemoryPutParams stores Value (any JSON) under Key. Rev nil writes
// unconditionally; otherwise the key's current rev must equal *Rev, "" for
// absent. Metadata nil keeps the stored metadata when KeepMetadata is set.
type MemoryPutParams struct {
	Key          string          `json:"key"`
	Value        json.RawMessage `json:"value"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	KeepMetadata bool            `json:"keepMetadata,omitempty"`
	Rev          *string         `json:"rev,omitempty"`
}

// MemoryPutResult is the stored write.
type MemoryPutResult struct {
	Rev string `json:"rev"`
	MemoryInfo
}

// SaveToolParams saves one function's source as a user tool.
type SaveToolParams struct {
	Name      string `json:"name"`
	Source    string `json:"source"`
	Doc       string `json:"doc"`
	Signature string `json:"signature"`
}

// SavedTool is one saved user tool; SavedAt is Unix seconds and SHA256 the
// hex digest of Source.
type SavedTool struct {
	Name      string  `json:"name"`
	Source    string  `json:"source,omitempty"`
	Doc       string  `json:"doc"`
	Signature string  `json:"signature"`
	SHA256    string  `json:"sha256"`
	SavedAt   float64 `json:"saved_at"`
}

// StoreError is a failure of the host's store, with the link error kind
// and code it maps to.
type StoreError struct {
	Code    int64
	Kind    string
	Message string
}

func (e *StoreError) Error() string { return e.Message }
