package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubernetesManifestsFlags: each manifests flag lands in the YAML, and
// a bad value or file is one line naming it, with exit 2 for a bad flag
// value and 1 for a file the bridge would not load.
func TestKubernetesManifestsFlags(t *testing.T) {
	dir := t.TempDir()
	servers := filepath.Join(dir, "servers.json")
	if err := os.WriteFile(servers, []byte(`{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "gh"]}}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badPolicy := filepath.Join(dir, "bad.policy")
	if err := os.WriteFile(badPolicy, []byte(`{"servers": `), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string // in stdout when code is 0, else in stderr
	}{
		{[]string{"--servers", servers, "--storage-class", "fast", "--storage-size", "20Gi"}, 0,
			"  storageClassName: fast\n  resources:\n    requests:\n      storage: 20Gi"},
		{[]string{"--servers", servers}, 0, `{"mcpServers": {"gh": {"command": "npx", "args": ["-y", "gh"]}}}`},
		{nil, 0, "value: bridge/sandbox.json"},
		{nil, 0, "image: localhost/bridge:latest"},
		{[]string{"--seccomp-profile", ""}, 0, "RuntimeDefault, which lets them open AF_INET sockets"},
		{[]string{"--replicas", "2"}, 0, `"0.0.0.0:8080", --metrics-principal, "prometheus", --leader-elect]`},
		{[]string{"--replicas", "2"}, 0, "podAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:"},
		{[]string{"--replicas", "2", "--volume-access", "ReadWriteMany"}, 0, "accessModes: [ReadWriteMany]"},
		{[]string{"--replicas", "2", "--volume-access", "ReadWriteMany"}, 0, "podAntiAffinity:\n          preferredDuringSchedulingIgnoredDuringExecution:"},
		{[]string{"--replicas", "4"}, 2, "bridge: kubernetes manifests: replicas: 4: want 1, or 2 to 3 (one leader serves, the others stand by)"},
		{[]string{"--volume-access", "RWX"}, 2, `bridge: kubernetes manifests: volume access: "RWX": want ReadWriteOnce`},
		{[]string{"--storage-size", "big"}, 2, `storage size: "big"`},
		{[]string{"--servers", filepath.Join(dir, "none.json")}, 1, "bridge: kubernetes manifests: --servers: "},
		{[]string{"--policy", badPolicy}, 1, "bridge: kubernetes manifests: --policy: " + badPolicy},
	} {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := m.Run(context.Background(), append([]string{"kubernetes", "manifests"}, c.args...))
		got := out.String()
		if c.code != 0 {
			got = errb.String()
		}
		if code != c.code || !strings.Contains(got, c.want) {
			t.Errorf("manifests %q = %d; want %d and %q in:\n%s%s", c.args, code, c.code, c.want, tail(out.String()), errb.String())
		}
		if c.code != 0 && strings.Count(strings.TrimSpace(errb.String()), "\n") > 0 {
			t.Errorf("manifests %q: want one line, got:\n%s", c.args, errb.String())
		}
	}
}

// tail is the end of long output.
func tail(s string) string {
	if len(s) > 400 {
		return "..." + s[len(s)-400:]
	}
	return s
}
