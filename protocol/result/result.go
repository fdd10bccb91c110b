// Package result is the outcome of one run_python call as it leaves the
// actors: the plain value the session actor fills from the sandbox's
// frames, and the renderers (engine/render) and bridge exec read.
package result

// Status values of a run_python result, as the reference names them.
const (
	StatusSuccess    = "success"
	StatusError      = "error"
	StatusTimeout    = "timeout"
	StatusValidation = "validation_error"
)

// DefaultSession is the session of a call without a session argument.
const DefaultSession = "default"

// Stream names of captured output.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Chunk is one run of captured output from one stream, in arrival order.
// When output was truncated, the omission marker line is carried as its own
// chunk, in the stream where the cut starts, so renderers need no extra rule.
type Chunk struct {
	Stream string // StreamStdout or StreamStderr
	Data   string
}

// Result is the outcome of one run_python call before rendering. It is a
// plain value: the front actor hands it to the engine's renderer.
type Result struct {
	Status string // one of the Status* constants
	// ExitCode is nil when unknown (timeout, validation error, sandbox start failure).
	ExitCode *int
	Session  string
	Servers  []string
	Output   []Chunk
	// Value is the repr of a final bare expression, nil when there is none.
	Value *string
	Error string
	// TimeoutSeconds is the effective timeout of the call.
	TimeoutSeconds int
	Truncated      bool
	// StateLost is set on the first result after the session's state was
	// lost; LossReason says why ("timeout", "memory limit exceeded", ...).
	StateLost  bool
	LossReason string
	// Notes are extra lines for the text form, such as the timeout clamp note,
	// without the "note: " prefix.
	Notes []string
	// Images are the call's figures and display()ed images, in the order
	// they were made; they follow the text in the tool result's content.
	Images []Image
	// ImageNotes say which images were not attached and why (over a cap,
	// saved to a file instead), without the "note: " prefix.
	ImageNotes []string
	// Internal marks a recovered panic: the summary is "Unexpected failure".
	Internal   bool
	DurationMs int64
}

// Image is one image of a result: base64 data, as MCP image content carries it.
type Image struct {
	MIMEType string
	Data     string
}

// IntPtr returns a pointer to n, for Result.ExitCode.
func IntPtr(n int) *int { return &n }
