package childproc

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The test binary stands in for the bridge binary under the parent
	// watcher (parentwatch_test.go).
	if len(os.Args) > 1 && os.Args[1] == WatchParentArg {
		os.Exit(RunParentWatcher(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}
