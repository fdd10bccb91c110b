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
	goleak.VerifyTestMain(m)
}
