package actors

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/bridge-mcp/bridge/actors/childproc"
)

func TestMain(m *testing.M) {
	// The test binary stands in for the bridge binary under the parent
	// watcher, which runs the children outside Linux (childproc).
	if len(os.Args) > 1 && os.Args[1] == childproc.WatchParentArg {
		os.Exit(childproc.RunParentWatcher(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == stubbornServerArg {
		os.Exit(runStubbornServer())
	}
	// mcp-go's in-process test servers keep a finished task until its ttl
	// (tasks_test.go); that sleeper is theirs, not the bridge's.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/mark3labs/mcp-go/server.(*MCPServer).scheduleTaskCleanup"))
}
