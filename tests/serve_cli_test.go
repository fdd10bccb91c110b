package tests

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestServeBadInvocation: a bad listen address, auth mode, tokens file or
// TLS pair stops bridge serve at once with one line naming the fix and
// exit code 2.
func TestServeBadInvocation(t *testing.T) {
	empty := writeTokens(t, "alice")
	shared := writeTokens(t, "alice t1", "bob t1")
	for _, c := range []struct {
		name   string
		tokens string
		args   []string
		want   string
	}{
		{"no tokens", "", []string{"--listen", "127.0.0.1:0"}, "MCP_BRIDGE_TOKENS_FILE is not set"},
		{"no auth off loopback", "", []string{"--listen", "0.0.0.0:0", "--insecure-no-auth"}, "only on a loopback address"},
		{"empty token", empty, []string{"--listen", "127.0.0.1:0"}, "line 1: principal alice has an empty token"},
		{"shared token", shared, []string{"--listen", "127.0.0.1:0"}, "line 2: the token of bob is also given to alice"},
		{"half a TLS pair", shared, []string{"--listen", "127.0.0.1:0", "--tls-cert", "x"}, "--tls-cert and --tls-key go together"},
		{"bad address", "", []string{"--listen", "8080", "--insecure-no-auth"}, "want HOST:PORT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bridgeBin, append([]string{"serve"}, c.args...)...)
			cmd.Env = baseEnv(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": c.tokens})
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want 2; stderr %s", err, stderr.String())
			}
			line := strings.TrimSpace(stderr.String())
			if strings.Count(line, "\n") != 0 || !strings.HasPrefix(line, "bridge: ") || !strings.Contains(line, c.want) {
				t.Errorf("stderr %q, want one line containing %q", line, c.want)
			}
			if strings.Contains(line, "t1") {
				t.Errorf("a token in the error: %q", line)
			}
		})
	}
}
