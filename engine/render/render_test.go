package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bridge-mcp/bridge/engine/toon"
	"github.com/bridge-mcp/bridge/protocol/result"
	"github.com/mark3labs/mcp-go/mcp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// durationMs masks the run time in golden files.
const durationMs = 42

func out(s string) result.Chunk { return result.Chunk{Stream: result.StreamStdout, Data: s} }
func errOut(s string) result.Chunk {
	return result.Chunk{Stream: result.StreamStderr, Data: s}
}
func str(s string) *string { return &s }

// The errors of a timeout as the actors write them (actors.timeoutError):
// the session kept its state, or lost it.
const (
	timeoutKept = "Execution timed out after 2s; the session kept its state. For longer work, pass a larger timeout (at most 120, MCP_BRIDGE_MAX_TIMEOUT) or start it in the background: job = runtime.start(code), then runtime.result(job) in later calls."
	timeoutLost = "Execution timed out after 2s; the cell ignored the interrupt, so the session was restarted and its state is lost. For longer work, pass a larger timeout (at most 120, MCP_BRIDGE_MAX_TIMEOUT) or start it in the background: job = runtime.start(code), then runtime.result(job) in later calls."
)

// statusRows are the rows of SPEC §8.3, in table order, plus one row that
// exercises the remaining keys.
var statusRows = []struct {
	name string
	r    result.Result
}{
	{"01-ran-no-output", result.Result{
		Status: result.StatusSuccess, ExitCode: result.IntPtr(0), Session: "default", TimeoutSeconds: 30,
	}},
	{"02-ran-some-output", result.Result{
		Status: result.StatusSuccess, ExitCode: result.IntPtr(0), Session: "default", TimeoutSeconds: 30,
		Servers: []string{"github"},
		Output:  []result.Chunk{out("hello\n"), out("world\n")},
	}},
	{"03-system-exit", result.Result{
		Status: result.StatusError, ExitCode: result.IntPtr(3), Session: "default", TimeoutSeconds: 30,
		Output: []result.Chunk{out("partial\n")},
		Error:  "SystemExit: 3",
	}},
	{"04-uncaught-exception", result.Result{
		Status: result.StatusError, ExitCode: result.IntPtr(1), Session: "default", TimeoutSeconds: 30,
		Output: []result.Chunk{
			out("before\n"),
			errOut("Traceback (most recent call last):\n  File \"<cell-1>\", line 2, in <module>\n    1/0\nZeroDivisionError: division by zero\n"),
		},
		Error: "ZeroDivisionError: division by zero",
	}},
	{"05-timeout-within-grace", result.Result{
		Status: result.StatusTimeout, Session: "default", TimeoutSeconds: 2,
		Output: []result.Chunk{out("start\n")},
		Error:  timeoutKept,
	}},
	{"06-timeout-container-killed", result.Result{
		Status: result.StatusTimeout, Session: "work", TimeoutSeconds: 2,
		Output:    []result.Chunk{out("start\n")},
		Error:     timeoutLost,
		StateLost: true, LossReason: "timeout",
	}},
	{"07-oom", result.Result{
		Status: result.StatusError, ExitCode: result.IntPtr(137), Session: "default", TimeoutSeconds: 30,
		Output:    []result.Chunk{out("allocating\n")},
		Error:     "memory limit exceeded (MCP_BRIDGE_MEMORY=512m); the session was restarted",
		StateLost: true, LossReason: "memory limit exceeded",
	}},
	{"08-container-death", result.Result{
		Status: result.StatusError, ExitCode: result.IntPtr(139), Session: "default", TimeoutSeconds: 30,
		Error:     "Sandbox exited with code 139",
		StateLost: true, LossReason: "sandbox exited with code 139",
	}},
	{"09-sandbox-cannot-start", result.Result{
		Status: result.StatusError, Session: "default", TimeoutSeconds: 30,
		Error: "No container runtime found. Install podman or rootless docker and set MCP_BRIDGE_RUNTIME if multiple runtimes are available.",
	}},
	{"10-invalid-argument", result.Result{
		Status: result.StatusValidation, Session: "default", TimeoutSeconds: 30,
		Error: "Missing 'code' argument",
	}},
	{"11-internal-bug", result.Result{
		Status: result.StatusError, Session: "default", TimeoutSeconds: 30,
		Error:    "runtime error: invalid memory address or nil pointer dereference",
		Internal: true,
	}},
	{"12-extras", result.Result{
		Status: result.StatusSuccess, ExitCode: result.IntPtr(0), Session: "analysis", TimeoutSeconds: 600,
		Servers: []string{"github", "memory"},
		Output: []result.Chunk{
			out("rows: 3, cols: 2\n"),
			errOut("warning: slow"),
			out("  indented\n\n()\n"),
			out("[... 1200 bytes omitted; full output in /workspace/.bridge/output-1.txt ...]\n"),
		},
		Value:     str("{'a': 1}"),
		Truncated: true,
		Notes:     []string{"timeout clamped to 600s (MCP_BRIDGE_MAX_TIMEOUT)"},
	}},
	{"13-images", result.Result{
		Status: result.StatusSuccess, ExitCode: result.IntPtr(0), Session: "default", TimeoutSeconds: 30,
		Output: []result.Chunk{out("plotted\n")},
		Images: []result.Image{{MIMEType: "image/png", Data: "iVBORw0KGgo="}, {MIMEType: "image/jpeg", Data: "/9j/"}},
		ImageNotes: []string{"2 images attached",
			"image of 2000000 bytes not attached: over MCP_BRIDGE_MAX_IMAGE_BYTES=1048576; saved to /workspace/.bridge/image-1-3.png"},
		Notes: []string{"timeout clamped to 120s (MCP_BRIDGE_MAX_TIMEOUT)"},
	}},
}

// goldenText is the reviewable form of a tool result.
func goldenText(t *testing.T, res *mcp.CallToolResult) []byte {
	t.Helper()
	if len(res.Content) != 1+len(imagesOf(t, res)) {
		t.Fatalf("got %d contents, want the text and the images", len(res.Content))
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok || tc.Type != "text" {
		t.Fatalf("content is %#v, want text", res.Content[0])
	}
	sc, ok := res.StructuredContent.(toon.Object)
	if !ok {
		t.Fatalf("structuredContent is %T, want toon.Object", res.StructuredContent)
	}
	raw, err := sc.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("isError: ")
	if res.IsError {
		b.WriteString("true\n")
	} else {
		b.WriteString("false\n")
	}
	b.WriteString("--- text\n")
	b.WriteString(tc.Text)
	b.WriteString("\n--- structuredContent\n")
	b.Write(ind.Bytes())
	b.WriteString("\n")
	for _, img := range imagesOf(t, res) {
		b.WriteString("--- image " + img.MIMEType + " " + img.Data + "\n")
	}
	return b.Bytes()
}

// imagesOf returns the image contents after the first content, failing on
// any other kind there.
func imagesOf(t *testing.T, res *mcp.CallToolResult) []mcp.ImageContent {
	t.Helper()
	var out []mcp.ImageContent
	for i, c := range res.Content {
		if i == 0 {
			continue
		}
		img, ok := c.(mcp.ImageContent)
		if !ok || img.Type != "image" {
			t.Fatalf("content[%d] is %#v, want image", i, c)
		}
		out = append(out, img)
	}
	return out
}

// TestGolden covers every §8.3 row in every mode (RND-3).
func TestGolden(t *testing.T) {
	for _, row := range statusRows {
		for _, mode := range []string{modeCompact, modeTOON, modeJSON} {
			t.Run(row.name+"/"+mode, func(t *testing.T) {
				r := row.r
				r.DurationMs = durationMs
				got := goldenText(t, Render(mode, r))
				path := filepath.Join("testdata", row.name+"."+mode+".golden")
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs\ngot:\n%s\nwant:\n%s", path, got, want)
				}
			})
		}
	}
}

// TestCompactText checks the §8.5 text byte for byte, including the results
// that must match the reference.
func TestCompactText(t *testing.T) {
	success := func(chunks ...result.Chunk) result.Result {
		return result.Result{Status: result.StatusSuccess, ExitCode: result.IntPtr(0), Session: "default", Output: chunks}
	}
	tests := []struct {
		name string
		r    result.Result
		want string
	}{
		{"reference: stdout lines", success(out("hello\n"), out("world\n")), "hello\nworld"},
		{"reference: stderr only", success(errOut("err\n")), "stderr:\nerr"},
		{"reference: stdout then stderr", success(out("a"), out("c\n"), errOut("b\n")), "ac\nstderr:\nb"},
		{"reference: no output", success(), "Success (no output)"},
		{"reference: timeout", result.Result{
			Status: result.StatusTimeout, TimeoutSeconds: 2, Output: []result.Chunk{out("start\n")},
			Error: "Execution timed out after 2s",
		}, "status: timeout\nstart\nerror: Execution timed out after 2s"},
		{"reference: validation", result.Result{
			Status: result.StatusValidation, Error: "Missing 'code' argument",
		}, "status: validation_error\nMissing 'code' argument\nerror: Missing 'code' argument"},
		{"leading spaces kept", success(out("  x\n")), "  x"},
		{"blank and () lines kept", success(out("a\n\n()\n\n")), "a\n\n()\n"},
		{"only one trailing newline dropped", success(out("a\n\n")), "a\n"},
		{"no trailing newline", success(out("a")), "a"},
		{"markers start lines", success(out("a"), errOut("b"), out("c")), "a\nstderr:\nb\nstdout:\nc"},
		{"runs merge across chunks", success(errOut("x\n"), errOut("y\n"), out("z\n")), "stderr:\nx\ny\nstdout:\nz"},
		{"empty chunks ignored", success(out(""), errOut("")), "Success (no output)"},
		{"unknown stream is stdout", success(result.Chunk{Data: "q\n"}), "q"},
		{"result only", result.Result{Status: result.StatusSuccess, Value: str("42")}, "42"},
		{"output then result", result.Result{Status: result.StatusSuccess, Output: []result.Chunk{out("hi\n")}, Value: str("42")}, "hi\n42"},
		{"exit code and summary", result.Result{
			Status: result.StatusError, ExitCode: result.IntPtr(2), Error: "SystemExit: 2",
		}, "status: error\nexit: 2\nSandbox error: SystemExit: 2"},
		{"exit 0 not shown on error", result.Result{
			Status: result.StatusError, ExitCode: result.IntPtr(0), Error: "boom",
		}, "status: error\nSandbox error: boom"},
		{"internal", result.Result{Status: result.StatusError, Error: "panic", Internal: true}, "status: error\nUnexpected failure"},
		// A timeout's error says what the summary says and whether the
		// state was kept: neither the summary nor the loss note repeats it.
		{"timeout without output: the error alone", result.Result{
			Status: result.StatusTimeout, TimeoutSeconds: 2, Error: timeoutKept,
		}, "status: timeout\nerror: " + timeoutKept},
		{"timeout that lost the state, and notes", result.Result{
			Status: result.StatusTimeout, TimeoutSeconds: 2, Error: timeoutLost,
			StateLost: true, LossReason: "timeout", Notes: []string{"timeout clamped to 2s (MCP_BRIDGE_MAX_TIMEOUT)", "second"},
		}, "status: timeout\nerror: " + timeoutLost + "\n" +
			"note: timeout clamped to 2s (MCP_BRIDGE_MAX_TIMEOUT)\nnote: second"},
		{"timeout after an earlier loss: the loss is noted", result.Result{
			Status: result.StatusTimeout, TimeoutSeconds: 2, Error: "Execution timed out after 2s; the session kept the state this call built.",
			StateLost: true, LossReason: "idle for more than 600s",
		}, "status: timeout\nerror: Execution timed out after 2s; the session kept the state this call built.\n" +
			"note: session state was lost (idle for more than 600s)"},
		{"a queued call's timeout: the error alone", result.Result{
			Status: result.StatusTimeout, TimeoutSeconds: 2, Error: "Session 'default' was busy with another call for the whole 2s timeout",
		}, "status: timeout\nerror: Session 'default' was busy with another call for the whole 2s timeout"},
		{"state lost and notes", result.Result{
			Status: result.StatusError, ExitCode: result.IntPtr(139), Error: "Sandbox exited with code 139",
			StateLost: true, LossReason: "sandbox exited with code 139", Notes: []string{"first", "second"},
		}, "status: error\nexit: 139\nSandbox error: Sandbox exited with code 139\n" +
			"note: session state was lost (sandbox exited with code 139)\nnote: first\nnote: second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Render(modeCompact, tt.r)
			got := res.Content[0].(mcp.TextContent).Text
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if got, want := res.IsError, tt.r.Status != result.StatusSuccess; got != want {
				t.Errorf("IsError = %v, want %v", got, want)
			}
		})
	}
}

func TestSplitLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n", []string{""}},
		{"\n\n", []string{"", ""}},
		{"a", []string{"a"}},
		{"a\n", []string{"a"}},
		{"a\n\n", []string{"a", ""}},
		{"a\nb", []string{"a", "b"}},
		{"  x\n()\n", []string{"  x", "()"}},
		{"a\r\nb\r\n", []string{"a\r", "b\r"}},
	}
	for _, tt := range tests {
		if got := splitLines(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("splitLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestStructuredStreams checks that the lists come from the concatenated
// chunks of each stream, not chunk by chunk.
func TestStructuredStreams(t *testing.T) {
	r := result.Result{Status: result.StatusSuccess, Session: "default", Output: []result.Chunk{
		out("a"), errOut("e1\ne"), out("b\nc"), errOut("2\n"), out("\n"),
	}}
	sc := Render(modeJSON, r).StructuredContent.(toon.Object)
	get := func(key string) []string {
		for _, f := range sc {
			if f.Key == key {
				return f.Value.([]string)
			}
		}
		return nil
	}
	if got, want := get("stdout"), []string{"ab", "c"}; !slices.Equal(got, want) {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := get("stderr"), []string{"e1", "e2"}; !slices.Equal(got, want) {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// TestEmptySession renders an absent session name as "default".
func TestEmptySession(t *testing.T) {
	r := result.Result{Status: result.StatusValidation, Error: "Missing 'code' argument"}
	full := Render(modeJSON, r).StructuredContent.(toon.Object)
	if got, want := full[2], (toon.Field{Key: "session", Value: "default"}); got != want {
		t.Errorf("full payload field 2 = %v, want %v", got, want)
	}
	compact := Render(modeCompact, r).StructuredContent.(toon.Object)
	for _, f := range compact {
		if f.Key == "session" {
			t.Errorf("compact payload has session %v", f.Value)
		}
	}
}

// TestJSONTextMatchesStructured checks that the json text is the structured
// payload, and that the wire form keeps the key order.
func TestJSONTextMatchesStructured(t *testing.T) {
	for _, row := range statusRows {
		res := Render(modeJSON, row.r)
		text := res.Content[0].(mcp.TextContent).Text
		body, ok := bytes.CutPrefix([]byte(text), []byte("```json\n"))
		body, ok2 := bytes.CutSuffix(body, []byte("\n```"))
		if !ok || !ok2 {
			t.Fatalf("%s: text is not a json fence: %q", row.name, text)
		}
		raw, err := res.StructuredContent.(toon.Object).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var compacted bytes.Buffer
		if err := json.Compact(&compacted, body); err != nil {
			t.Fatal(err)
		}
		if got, want := compacted.String(), string(raw); got != want {
			t.Errorf("%s: text %s, structured %s", row.name, got, want)
		}
		wire, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(wire, []byte(`"structuredContent":{"status":`)) {
			t.Errorf("%s: wire form does not start structuredContent with status: %s", row.name, wire)
		}
	}
}
