//go:build !unix

package oauth

import "sync"

var dirLock sync.Mutex

// lockDir serializes writers within this process only: file locks are
// unix-only here.
func lockDir(string) (func(), error) {
	dirLock.Lock()
	return dirLock.Unlock, nil
}
