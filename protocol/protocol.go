package protocol

import "encoding/json"

// Method names of the host↔sandbox link. doc.go describes each one.
const (
	MethodBoot      = "boot"
	MethodReady     = "ready"
	MethodExec      = "exec"
	MethodInterrupt = "interrupt"
	MethodShutdown  = "shutdown"
	MethodOutput    = "output"

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
	MethodLoadTool          = "load_tool"
)

// Limits are the sandbox-side bounds sent in the boot frame.
type Limits struct {
	MaxFrameBytes  int `json:"maxFrameBytes"`
	MaxOutputBytes int `json:"maxOutputBytes"`
	MaxInFlight    int `json:"maxInFlight"`
}

// BootParams is the first line the host writes to a new sandbox.
type BootParams struct {
	Files   map[string]string `json:"files"`
	Main    string            `json:"main"`
	Version string            `json:"version"`
	Limits  Limits            `json:"limits"`
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
	Name  string `json:"name"`
	Alias string `json:"alias"`
	Tools []Tool `json:"tools"`
}

// ExecParams asks the sandbox to run one cell.
type ExecParams struct {
	Call        int64    `json:"call"`
	Code        string   `json:"code"`
	Servers     []Server `json:"servers"`
	OutputLimit int      `json:"outputLimit"`
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
}

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
)

// Error codes of link errors: the range -32000..-32019 (LNK-6), plus the
// JSON-RPC codes for unknown methods and invalid params (LNK-3).
const (
	CodeNotAvailable     = -32000
	CodeTimeout          = -32001
	CodeInvalidArguments = -32002
	CodeServerError      = -32003
	CodeTransport        = -32004
	CodeNotFound         = -32005
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
)

// ErrorData is the data member of a link error.
type ErrorData struct {
	Kind string `json:"kind"`
}
