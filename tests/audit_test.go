package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditTrail runs bridge serve with two principals and the audit trail
// on (its default under serve): each call's record names its principal, its
// code's digest and its inner calls with their arguments and results; no
// token appears in any record, even one the code holds; `bridge audit
// verify` finds the chain intact, and names the record after an edit, a
// removal or a reordering, while a line cut short by a crash is reported
// as such; `bridge audit show` filters by principal and tool.
func TestAuditTrail(t *testing.T) {
	requirePodman(t)
	state, keyDir := t.TempDir(), t.TempDir()
	key := filepath.Join(keyDir, "key")
	tokens := writeTokens(t, "alice "+aliceToken, "bob "+bobToken)
	env := withServers(t, map[string]any{"svc": fake()}, map[string]string{
		"MCP_BRIDGE_TOKENS_FILE": tokens, "MCP_BRIDGE_STATE_DIR": state, "MCP_BRIDGE_KEY_FILE": key})
	s := startServe(t, env)
	alice, bob := s.mustClient(aliceToken), s.mustClient(bobToken)
	aliceCode := "token = '" + aliceToken + "'\nsave_memory('k', 'v')\nprint(await runtime.call_tool('svc', 'echo', {'text': 'hello', 'api_key': 'sk-' + 'live-1234567890'}, validate=False))"
	if r := callHTTP(t, alice, map[string]any{"code": aliceCode, "servers": []string{"svc"}}); r.IsError {
		t.Fatalf("alice: %s", text(t, r))
	}
	if r := callHTTP(t, bob, map[string]any{"code": "print(1)"}); r.IsError {
		t.Fatalf("bob: %s", text(t, r))
	}
	// runtime.history: alice's own calls only, without bob's.
	r := callHTTP(t, alice, map[string]any{"code": "h = runtime.history(100)\nprint(len(h), h[0]['code_sha256'][:12], [i.get('tool') for i in h[0]['inner']])"})
	if got, want := text(t, r), fmt.Sprintf("1 %s [None, 'echo']", audit12(aliceCode)); r.IsError || got != want {
		t.Errorf("alice's runtime.history: %q, want %q", got, want)
	}
	s.stop()

	cli := map[string]string{"MCP_BRIDGE_STATE_DIR": state, "MCP_BRIDGE_KEY_FILE": key}
	out, errOut, code := runCLI(t, cli, "", "audit", "show", "--json")
	if code != 0 {
		t.Fatalf("audit show: exit %d: %s", code, errOut)
	}
	type inner struct {
		Method, Server, Tool, Outcome string
		Args, Result                  *struct{ JSON json.RawMessage }
	}
	var recs []struct {
		Principal, Session, Status string
		CodeSHA                    string `json:"code_sha256"`
		Code                       string
		Inner                      []inner
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Principal, Session, Status string
			CodeSHA                    string `json:"code_sha256"`
			Code                       string
			Inner                      []inner
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit show --json line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 3 || recs[0].Principal != "alice" || recs[1].Principal != "bob" || recs[2].Principal != "alice" {
		t.Fatalf("records %+v, want alice's, bob's, alice's", recs)
	}
	a := recs[0]
	if sum := sha256.Sum256([]byte(aliceCode)); a.CodeSHA != hex.EncodeToString(sum[:]) || a.Status != "success" {
		t.Errorf("alice's record: code digest %s, status %s", a.CodeSHA, a.Status)
	}
	var methods []string
	var echo *inner
	for i, in := range a.Inner {
		methods = append(methods, in.Method)
		if in.Tool == "echo" {
			echo = &a.Inner[i]
		}
	}
	if got, want := strings.Join(methods, ","), "memory_put,call_tool"; got != want {
		t.Errorf("alice's inner calls: %s, want %s", got, want)
	}
	if echo == nil || echo.Server != "svc" || echo.Outcome != "ok" || echo.Args == nil || echo.Result == nil ||
		!strings.Contains(string(echo.Args.JSON), `"text":"hello"`) || !strings.Contains(string(echo.Result.JSON), "hello") {
		t.Errorf("the echo call: %+v, want svc.echo with its arguments and result", echo)
	}

	// No token, and no value of a secret-looking key, in any file.
	files, _ := filepath.Glob(filepath.Join(state, ".bridge", "audit", "audit-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("audit files %v, want one", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{aliceToken, bobToken, "sk-live-1234567890"} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("the audit file holds %q", secret)
		}
	}
	if st, _ := os.Stat(files[0]); st.Mode().Perm() != 0o600 {
		t.Errorf("audit file mode %v, want 0600", st.Mode().Perm())
	}

	out, _, code = runCLI(t, cli, "", "audit", "show", "--principal", "bob")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "  bob  default #") {
		t.Errorf("audit show --principal bob: exit %d:\n%s", code, out)
	}
	out, _, code = runCLI(t, cli, "", "audit", "show", "--tool", "echo")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "svc.echo") {
		t.Errorf("audit show --tool echo: exit %d:\n%s", code, out)
	}
	if out, errOut, code := runCLI(t, cli, "", "audit", "verify"); code != 0 || out != "3 records, chain intact\n" {
		t.Errorf("audit verify: exit %d: %s%s", code, out, errOut)
	}

	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1] // after the last newline
	id := func(line []byte) string {
		var r struct{ ID string }
		_ = json.Unmarshal(line, &r)
		return r.ID
	}
	for _, c := range []struct {
		name, want string
		file       []byte
	}{
		{"edited", "(record " + id(lines[0]) + "): its MAC does not match", bytes.Join([][]byte{bytes.Replace(lines[0], []byte(`"status":"success"`), []byte(`"status":"error"`), 1), lines[1]}, nil)},
		{"removed", "(record " + id(lines[1]) + "): the chain starts at record 2", lines[1]},
		{"reordered", "(record " + id(lines[1]) + "): the chain starts at record 2", bytes.Join([][]byte{lines[1], lines[0]}, nil)},
		{"cut by a crash", "", append(bytes.Clone(data), `{"id":"x","ti`...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			copyState := t.TempDir()
			dir := filepath.Join(copyState, ".bridge", "audit")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(files[0])), c.file, 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runCLI(t, map[string]string{"MCP_BRIDGE_STATE_DIR": copyState, "MCP_BRIDGE_KEY_FILE": key}, "", "audit", "verify")
			if c.want == "" {
				if code != 0 || !strings.HasPrefix(out, "3 records, chain intact\nnote: ") || !strings.Contains(out, "incomplete line: a crash") {
					t.Errorf("audit verify: exit %d: %s%s, want intact with a note on the incomplete line", code, out, errOut)
				}
				return
			}
			if code != 1 || !strings.Contains(out, c.want) {
				t.Errorf("audit verify: exit %d: %s%s, want exit 1 naming %q", code, out, errOut, c.want)
			}
		})
	}
}

// audit12 is the first 12 hex digits of code's SHA-256.
func audit12(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])[:12]
}

// TestAuditOffHistory: with the audit trail off, runtime.history() is
// empty and the result says why.
func TestAuditOffHistory(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_AUDIT": "off"})
	got := b.mustOK("print(runtime.history())")
	if want := "[]\nnote: runtime.history() is empty: the audit trail is off (MCP_BRIDGE_AUDIT=on turns it on; bridge serve has it on)"; got != want {
		t.Errorf("runtime.history() with the trail off:\n got %q\nwant %q", got, want)
	}
}
