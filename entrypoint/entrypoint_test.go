package entrypoint

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// TestBootstrapSize checks CTR-3: the -c snippet stays under 1 KiB.
func TestBootstrapSize(t *testing.T) {
	if n := len(Bootstrap); n == 0 || n >= 1024 {
		t.Errorf("bootstrap is %d bytes, want 1..1023", n)
	}
}

// TestFiles checks the boot frame's modules: every .py file and the manual.
func TestFiles(t *testing.T) {
	f := Files()
	for _, name := range []string{"bootstrap.py", "supervisor.py", "worker.py", "link.py", "mcp_runtime.py", "jobs.py", "manual.md", Main + ".py"} {
		if f[name] == "" {
			t.Errorf("Files() lacks %s", name)
		}
	}
	if strings.HasSuffix(Manual, "\n") {
		t.Errorf("Manual ends with a newline")
	}
}

// TestModulesCompile byte-compiles every module with the host's python3,
// so a syntax error fails here rather than in a container.
func TestModulesCompile(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to check the entrypoint: %v", err)
	}
	for name, src := range Files() {
		if !strings.HasSuffix(name, ".py") {
			continue
		}
		cmd := exec.Command(py, "-c", "import sys; compile(sys.stdin.read(), sys.argv[1], 'exec')", name)
		cmd.Stdin = strings.NewReader(src)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not compile: %v\n%s", name, err, out)
		}
	}
}

// TestManualBudget checks MAN-1: the manual costs at most 550 o200k tokens
// (450 before the first-hour work documented grants, search states and the
// saved-tool rules) and covers what it must.
func TestManualBudget(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := enc.Count(Manual)
	if n > 550 {
		t.Errorf("manual is %d o200k tokens, budget 550", n)
	}
	for _, want := range []string{"persist", "reset()", "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "search_tool_docs", "MCPError",
		"/workspace/.bridge/", "cwd", "mcp_servers[", "import mcp.servers.",
		"runtime.start(", "runtime.result(", "runtime.jobs()"} {
		if !strings.Contains(Manual, want) {
			t.Errorf("manual does not mention %q", want)
		}
	}
}
