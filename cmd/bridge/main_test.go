package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bridge-mcp/bridge/protocol/result"
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
		{[]string{"nope"}, nil, 2, "", `bridge: unknown command "nope" (commands: run, serve, exec, doctor, auth, audit, replay, image, bench, kubernetes, version, help; bridge help)`},
		{[]string{"exce"}, nil, 2, "", `bridge: unknown command "exce"; did you mean "exec"? (commands: run,`},
		{[]string{"image"}, nil, 2, "", "bridge: image: want a subcommand: bridge image build (bridge image --help)"},
		{[]string{"image", "buld"}, nil, 2, "", `bridge: image: unknown subcommand "buld"; did you mean "build"?`},
		{[]string{"image", "build", "--method", "x"}, nil, 2, "", `bridge: image build: invalid --method "x"`},
		{[]string{"image", "build", "--bridge", "--method", "containerfile"}, nil, 2, "", "bridge: image build: --bridge builds with the debian method only; drop --method containerfile\n"},
		{[]string{"run", "extra"}, nil, 2, "", `bridge: run: unexpected argument "extra": run takes no arguments (bridge run --help)`},
		{[]string{"--watch", "extra"}, nil, 2, "", `bridge: run: unexpected argument "extra"`},
		{[]string{"version", "x"}, nil, 2, "", `bridge: version: unexpected argument "x"`},
		{[]string{"doctor", "foo"}, nil, 2, "", `bridge: doctor: unexpected argument "foo": doctor takes no arguments; to check one server: bridge doctor --server foo`},
		{[]string{"doctor", "--sever", "x"}, nil, 2, "", `bridge: doctor: unknown flag --sever; did you mean --server? (bridge doctor --help)`},
		{[]string{"bench", "--samples", "-5"}, nil, 2, "", `bridge: bench: invalid --samples -5: want an integer >= 1`},
		{[]string{"bench", "--samples", "many"}, nil, 2, "", `bridge: bench: invalid value "many" for --samples: want an integer`},
		{[]string{"exec", "--servres", "x", "1"}, nil, 2, "", `bridge: exec: unknown flag --servres; did you mean --servers? (bridge exec --help)`},
		{[]string{"exec", "-1"}, nil, 2, "", `bridge: exec: unknown flag -1; flags: --output, --servers, --session, --timeout; code that starts with '-' goes after --: bridge exec -- CODE`},
		{[]string{"exec", "--timeout"}, nil, 2, "", `bridge: exec: --timeout needs a value (bridge exec --help)`},
		{[]string{"exec", "--timeout", "-3", "1"}, nil, 2, "", `bridge: exec: invalid --timeout -3: want a number of seconds >= 1`},
		{[]string{"exec", "a", "b"}, nil, 2, "", `bridge: exec: want one CODE argument, got 2: quote the code`},
		{[]string{"exec", "1", "--output", "yaml"}, nil, 2, "", `bridge: exec: invalid --output "yaml": want compact, toon or json`},
		{[]string{"help", "exce"}, nil, 2, "", `bridge: help: unknown command "exce"; did you mean "exec"?`},
		{[]string{"help", "exec", "run"}, nil, 2, "", `bridge: help: want at most one COMMAND`},
		{[]string{"run"}, map[string]string{"MCP_BRIDGE_PIDS": "3"}, 2, "", `bridge: invalid MCP_BRIDGE_PIDS="3": want an integer from 8 to`},
		{[]string{"exec", "--timeout", "x", "1"}, nil, 2, "", `bridge: exec: invalid value "x" for --timeout: want an integer (bridge exec --help)`},
		{[]string{"serve", "--metrics-principal", "a/b"}, nil, 2, "", `bridge: serve: --metrics-principal "a/b": a principal is 1-64 characters`},
		{[]string{"serve", "--insecure-no-auth", "--leader-elect"}, map[string]string{"MCP_BRIDGE_RUNTIME": "local", "MCP_BRIDGE_UNSAFE_LOCAL": "1"}, 2, "",
			`bridge: serve: --leader-elect needs MCP_BRIDGE_RUNTIME=kubernetes: the replicas share a Lease`},
		{[]string{"kubernetes", "manifests", "--metrics-principal", "a: b"}, nil, 2, "", `bridge: kubernetes manifests: --metrics-principal "a: b": a principal is`},
		{[]string{"kubernetes", "manifests", "--metrics-principal", "ops"}, nil, 0, "# The bridge in a cluster", ""},
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

// TestHelp checks that every command prints its usage with every flag to
// stdout and exits 0, however help is asked for, and that the top-level
// help lists every command with one line.
func TestHelp(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		return m.Run(context.Background(), args), out.String(), errb.String()
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, errOut := run(args...)
		if code != 0 || errOut != "" {
			t.Errorf("bridge %q: exit %d, stderr %q; want 0, nothing", args, code, errOut)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  "+c.name+" ") {
				t.Errorf("bridge %q lists no line for %s:\n%s", args, c.name, out)
			}
		}
	}
	flags := map[string][]string{
		"run":        {"--watch"},
		"exec":       {"--servers NAMES", "--session NAME", "--timeout SECONDS", "--output MODE", "(CODE | -)"},
		"doctor":     {"--json", "--server NAME"},
		"image":      {"--method METHOD", "--tag TAG", "--suite SUITE", "--mirror URL"},
		"bench":      {"--quick", "--samples N", "--out DIR", "--npm-dir DIR"},
		"serve":      {"--metrics-principal PRINCIPAL", "/metrics", "403"},
		"kubernetes": {"--metrics-principal PRINCIPAL"},
		"version":    {},
		"help":       {},
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			code, out, errOut := run(args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: bridge "+c.name) {
				t.Errorf("bridge %q: exit %d, stdout %q, stderr %q; want 0 and the usage", args, code, out, errOut)
			}
			for _, f := range flags[c.name] {
				if !strings.Contains(out, f) {
					t.Errorf("bridge %q does not show %q:\n%s", args, f, out)
				}
			}
		}
	}
	if code, out, _ := run("image", "build", "--help"); code != 0 || !strings.HasPrefix(out, "usage: bridge image build [flags]") {
		t.Errorf("bridge image build --help: exit %d, %q", code, out)
	}
}

// TestUnfence checks that exec prints the json and toon documents bare.
func TestUnfence(t *testing.T) {
	cases := []struct{ text, mode, want string }{
		{"```json\n{\"a\": 1}\n```", "json", `{"a": 1}`},
		{"```toon\na: 1\n```", "toon", "a: 1"},
		{"```json\n{}\n```", "compact", "```json\n{}\n```"},
		{"plain", "json", "plain"},
	}
	for _, c := range cases {
		if got := unfence(c.text, c.mode); got != c.want {
			t.Errorf("unfence(%q, %q) = %q, want %q", c.text, c.mode, got, c.want)
		}
	}
}

// TestStatusLine checks the line exec prints on stderr after the output when
// stdout is a terminal.
func TestStatusLine(t *testing.T) {
	for _, tc := range []struct {
		res  result.Result
		want string
	}{
		{result.Result{Status: result.StatusSuccess, ExitCode: result.IntPtr(0)}, "bridge: status success, exit 0"},
		{result.Result{Status: result.StatusError, ExitCode: result.IntPtr(3)}, "bridge: status error, exit 3"},
		{result.Result{Status: result.StatusTimeout}, "bridge: status timeout"},
		{result.Result{Status: result.StatusValidation}, "bridge: status validation_error"},
	} {
		if got := statusLine(tc.res); got != tc.want {
			t.Errorf("statusLine(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
}

// TestKubernetesManifestsMetricsPrincipal: the manifests' Deployment
// passes bridge serve the --metrics-principal given to the manifests
// command, or "prometheus".
func TestKubernetesManifestsMetricsPrincipal(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kubernetes", "manifests"}, `args: [serve, --listen, "0.0.0.0:8080", --metrics-principal, "prometheus"]`},
		{[]string{"kubernetes", "manifests", "--metrics-principal", "ops", "--metrics-principal", "graf"},
			`args: [serve, --listen, "0.0.0.0:8080", --metrics-principal, "ops", --metrics-principal, "graf"]`},
	} {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := m.Run(context.Background(), c.args); code != 0 || !strings.Contains(out.String(), c.want) {
			t.Errorf("Run(%q) = %d, stderr %q; want 0 and a line %q in:\n%s", c.args, code, errb.String(), c.want, out.String())
		}
	}
}
