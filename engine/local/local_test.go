package local

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartHangUp: a local sandbox on either link starts, ends on the
// host's hang-up (EOF before the boot frame), and leaves nothing running.
func TestStartHangUp(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	for _, link := range []string{"auto", "stdio"} {
		l := &Launcher{Link: link, Log: zerolog.Nop()}
		box, err := l.Start(context.Background(), "s")
		if err != nil {
			t.Fatalf("%s: %v", link, err)
		}
		if box.Name() != "" || box.Link() == nil {
			t.Errorf("%s: name %q, link %v; want no name and a link", link, box.Name(), box.Link())
		}
		box.HangUp()
		select {
		case <-box.Exited():
		case <-time.After(10 * time.Second):
			box.Kill()
			<-box.Exited()
			t.Errorf("%s: the sandbox did not end on hang-up", link)
		}
		box.Remove(context.Background())
		_ = box.Link().Close()
		box.Release()
	}
}

func TestStartError(t *testing.T) {
	err, retry := (&Launcher{}).StartError("\n  Traceback: boom\nmore\n", 3)
	if got, want := err.Error(), "local sandbox exited with code 3: Traceback: boom"; got != want || retry {
		t.Errorf("got (%q, %v), want (%q, false)", got, retry, want)
	}
}
