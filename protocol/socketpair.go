package protocol

import (
	"os"
	"syscall"
)

// SocketPair returns the two ends of a connected Unix stream socket, for a
// sandbox's socket link: the host keeps one and passes the other to the
// container CLI as an extra descriptor. Both are close-on-exec, set under
// syscall.ForkLock, so no other child inherits either.
func SocketPair() (host, box *os.File, err error) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "link"), os.NewFile(uintptr(fds[1]), "link-box"), nil
}
