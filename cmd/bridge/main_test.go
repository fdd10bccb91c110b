package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunUsage checks CLI-1 for commands that need no runtime.
func TestRunUsage(t *testing.T) {
	cases := []struct {
		args     []string
		env      map[string]string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{[]string{"version"}, nil, 0, "bridge " + Version() + " (", ""},
		{[]string{"--version"}, nil, 0, "bridge " + Version() + " (", ""},
		{[]string{"nope"}, nil, 2, "", `bridge: unknown command "nope"; commands: run, exec, doctor, image, bench, version`},
		{[]string{"image"}, nil, 2, "", "bridge: image: want `bridge image build"},
		{[]string{"image", "build", "--method", "x"}, nil, 2, "", `bridge: image build: invalid --method "x"`},
		{[]string{"run", "extra"}, nil, 2, "", `bridge: run: unexpected argument "extra"`},
		{[]string{"run"}, map[string]string{"MCP_BRIDGE_PIDS": "3"}, 2, "", `bridge: invalid MCP_BRIDGE_PIDS="3": want an integer from 8 to`},
		{[]string{"exec", "--timeout", "x", "1"}, nil, 2, "", "bridge: exec: invalid value"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return c.env[k] }}
		code := m.Run(context.Background(), c.args)
		if code != c.wantCode || !strings.HasPrefix(out.String(), c.wantOut) || !strings.HasPrefix(errb.String(), c.wantErr) ||
			strings.Count(errb.String(), "\n") > 1 {
			t.Errorf("Run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out.String(), errb.String(), c.wantCode, c.wantOut, c.wantErr)
		}
	}
}
