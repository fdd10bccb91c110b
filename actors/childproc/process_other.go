//go:build !linux

package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
)

// parentPipe is the pipe whose only writer is this process: every watcher
// gets its read end as fd 3 and sees EOF when this process dies, however it
// dies. The write end is never closed.
var parentPipe struct {
	once sync.Once
	r, w *os.File
	err  error
}

// startDying starts cmd under the parent watcher (parentwatch.go): macOS and
// the BSDs have no parent-death signal, so the bridge binary itself runs
// between the bridge and cmd, reading a pipe whose only writer is the
// bridge; when the bridge dies, the watcher sees EOF and SIGKILLs the
// process group, as Pdeathsig does on Linux.
func startDying(cmd *exec.Cmd) (*Process, error) {
	parentPipe.once.Do(func() {
		parentPipe.r, parentPipe.w, parentPipe.err = os.Pipe()
	})
	if parentPipe.err != nil {
		return nil, fmt.Errorf("parent watch pipe: %w", parentPipe.err)
	}
	return startWatched(cmd, parentPipe.r)
}
