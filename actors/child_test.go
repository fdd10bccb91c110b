package actors

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
	c, err := startChild(exec.Command("/bin/sh", "-c", `echo last words >&2; trap '' TERM; exec sleep 60`), false, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	c.stop(50*time.Millisecond, 50*time.Millisecond)
	c.release(time.Second)
	select {
	case <-c.exited():
	default:
		t.Fatal("child still running after stop")
	}
	if got, want := c.proc.code, 128+int(syscall.SIGKILL); got != want {
		t.Errorf("exit code %d, want %d", got, want)
	}
	if got, want := c.stderr.String(), "last words"; got != want {
		t.Errorf("stderr tail %q, want %q", got, want)
	}
}
