package engine

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// spillRe finds the in-session spill file a truncated result's marker names.
var spillRe = regexp.MustCompile(`full output in (/workspace/\.bridge/output-[0-9]+\.txt)`)

// maxFetchedSpill bounds what FetchSpill copies; the sandbox caps a spill
// file at 16 MiB, so this is only a guard against a hostile session.
const maxFetchedSpill = 64 << 20

// SpillPath returns the spill file a truncated result names, "" when none.
func SpillPath(r result.Result) string {
	if !r.Truncated {
		return ""
	}
	for _, c := range r.Output {
		if m := spillRe.FindStringSubmatch(c.Data); m != nil {
			return m[1]
		}
	}
	return ""
}

// maxFetchTime is the longest a spill copy may take, whatever the timeout.
const maxFetchTime = 10 * time.Second

// FetchBound is how long the whole copy of a spill file may take for a
// result whose call had timeoutSeconds: min(maxFetchTime, 2× the timeout).
// The copy runs code in the session, which the cell may have sabotaged (an
// open() that never ends, or reads that never run dry), so bridge exec
// ends within a bound its --timeout sets however the session behaves.
func FetchBound(timeoutSeconds int) time.Duration {
	return min(maxFetchTime, 2*time.Duration(max(timeoutSeconds, 1))*time.Second)
}

// FetchSpill copies the spill file of a truncated result out of its session
// to <state>/.bridge/output/ on the host and returns the host path. It must
// run before the session ends (bridge exec removes its container when it
// exits): it reads the file through the session itself, base64 chunks that
// each fit under the output cap, all within FetchBound. A run still going
// at that deadline is interrupted (and its container killed after the
// interrupt's grace), and the copy fails.
func (e *Engine) FetchSpill(ctx context.Context, r result.Result) (string, error) {
	src := SpillPath(r)
	if src == "" {
		return "", errors.New("the result names no spill file")
	}
	bound := FetchBound(r.TimeoutSeconds)
	ctx, cancel := context.WithTimeout(withInternal(ctx), bound)
	defer cancel()
	deadline, _ := ctx.Deadline()
	chunk := (e.Env.MaxOutputBytes / 2) / 3 * 3 // base64 of it is 2/3 of the cap
	var data []byte
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return "", fmt.Errorf("copying %s took over %v", src, bound)
		}
		code := fmt.Sprintf("import base64, sys\nwith open(%q, 'rb') as f:\n    f.seek(%d)\n    sys.stdout.write(base64.b64encode(f.read(%d)).decode())",
			src, len(data), chunk)
		timeout := min(30, e.Env.MaxTimeout, int((left+time.Second-1)/time.Second))
		res := e.dispatcher.RunArgs(ctx, actors.Args{Code: code, Session: r.Session, Timeout: timeout}, time.Now())
		if ctx.Err() != nil {
			return "", fmt.Errorf("copying %s took over %v", src, bound)
		}
		if res.Status != result.StatusSuccess || res.Truncated {
			// The session's text is bounded: a sabotaged read may print
			// up to the output cap.
			return "", fmt.Errorf("read %s: %s", src, printable.Log(strings.TrimSpace(res.Error+" "+stdoutOf(res))))
		}
		part, err := base64.StdEncoding.DecodeString(stdoutOf(res))
		if err != nil {
			return "", fmt.Errorf("read %s: %w", src, err)
		}
		data = append(data, part...)
		if len(part) < chunk {
			break
		}
		if len(data) > maxFetchedSpill {
			return "", fmt.Errorf("read %s: over %d MiB", src, maxFetchedSpill>>20)
		}
	}
	dir := filepath.Join(e.Env.StateDir, ".bridge", "output")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, fmt.Sprintf("exec-%s-%s", time.Now().UTC().Format("20060102T150405.000"), filepath.Base(src)))
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		return "", err
	}
	return dst, nil
}

func stdoutOf(r result.Result) string {
	var b strings.Builder
	for _, c := range r.Output {
		if c.Stream == result.StreamStdout {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}
