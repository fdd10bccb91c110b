package childproc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestChildStopEscalates: a child that ignores stdin EOF and SIGTERM is
// killed by its group, and its stderr tail survives the stop.
func TestChildStopEscalates(t *testing.T) {
	c, err := StartChild(exec.Command("/bin/sh", "-c", `echo last words >&2; trap '' TERM; exec sleep 60`), false, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(50*time.Millisecond, 50*time.Millisecond)
	c.Release(time.Second)
	select {
	case <-c.Exited():
	default:
		t.Fatal("child still running after stop")
	}
	if got, want := c.Proc.Code(), 128+int(syscall.SIGKILL); got != want {
		t.Errorf("exit code %d, want %d", got, want)
	}
	if got, want := c.Stderr.String(), "last words"; got != want {
		t.Errorf("stderr tail %q, want %q", got, want)
	}
}
