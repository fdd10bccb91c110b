package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/container"
)

// limitsWarning is the container launcher's LimitsWarning for a memory
// and pids limit.
func limitsWarning(f container.RuntimeFacts, memory string, pids int) string {
	return container.New(container.Config{Memory: memory, Pids: pids}, zerolog.Nop()).LimitsWarning(f)
}

// TestDoctorRuntimeFixes checks that each runtime problem doctor can name
// comes with its fix in the same line.
func TestDoctorRuntimeFixes(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"vfs rootless", func() string {
			_, d := storageCheck(container.RuntimeFacts{Engine: "podman", Driver: "vfs", Rootless: true})
			return d
		}(),
			`driver = "overlay" in ~/.config/containers/storage.conf`},
		{"vfs docker", func() string { _, d := storageCheck(container.RuntimeFacts{Engine: "docker", Driver: "vfs"}); return d }(),
			`"storage-driver": "overlay2" in /etc/docker/daemon.json`},
		{"overlay", func() string {
			s, d := storageCheck(container.RuntimeFacts{Engine: "podman", Driver: "overlay"})
			return s + " " + d
		}(),
			"OK podman storage driver overlay"},
		{"docker unknown oci runtime", ociRuntimeProblem(container.RuntimeFacts{Engine: "docker", Version: "20.10.24", Runtimes: []string{"runc"}}, "runsc"),
			`docker 20.10.24 does not know the runtime "runsc" (MCP_BRIDGE_OCI_RUNTIME; known: runc): register it under "runtimes" in /etc/docker/daemon.json`},
		{"docker known oci runtime", ociRuntimeProblem(container.RuntimeFacts{Engine: "docker", Runtimes: []string{"runc", "runsc"}}, "runsc"), ""},
		{"podman missing oci runtime", ociRuntimeProblem(container.RuntimeFacts{Engine: "podman"}, "/nonexistent/runsc"),
			`OCI runtime "/nonexistent/runsc" (MCP_BRIDGE_OCI_RUNTIME) not found: install it`},
		{"limits rootless v1", limitsWarning(container.RuntimeFacts{Engine: "podman", Rootless: true, Cgroup: "1"}, "512m", 128),
			"rootless podman on cgroup v1 cannot enforce --memory, --pids-limit or --cpus; the sandbox is held by per-process ulimits instead (data=512m, nproc=128)"},
		{"limits rootful v1", limitsWarning(container.RuntimeFacts{Engine: "podman", Cgroup: "1"}, "", 0), ""},
		{"limits rootless v2", limitsWarning(container.RuntimeFacts{Engine: "podman", Rootless: true, Cgroup: "2"}, "", 0), ""},
	}
	for _, tt := range tests {
		if (tt.want == "") != (tt.got == "") || !strings.Contains(tt.got, tt.want) || strings.Contains(tt.got, "\n") {
			t.Errorf("%s: got %q, want one line containing %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestHasSubIDRange(t *testing.T) {
	file := filepath.Join(t.TempDir(), "subuid")
	if err := os.WriteFile(file, []byte("alice:100000:65536\n1002:165536:65536\nbob:231072:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, uid string
		want      bool
	}{
		{"alice", "1001", true}, {"carol", "1002", true}, {"bob", "1003", false}, {"dave", "1004", false},
	}
	for _, tt := range tests {
		if got := hasSubIDRange(file, tt.name, tt.uid); got != tt.want {
			t.Errorf("hasSubIDRange(%s, %s) = %v, want %v", tt.name, tt.uid, got, tt.want)
		}
	}
	if hasSubIDRange(filepath.Join(t.TempDir(), "missing"), "alice", "1001") {
		t.Error("a missing file has a range")
	}
}
