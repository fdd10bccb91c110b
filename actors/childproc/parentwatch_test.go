package childproc

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParentWatcherKillsGroupOnParentDeath runs a shell that starts a
// grandchild under the watcher (the macOS path, exercised here on any OS),
// closes the pipe's write end as a dying bridge would, and checks that the
// whole group is gone.
func TestParentWatcherKillsGroupOnParentDeath(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := startWatched(cmd, r)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read grandchild pid: %v", err)
	}
	sleepPid, _ := strconv.Atoi(strings.TrimSpace(line))
	if sleepPid <= 0 || syscall.Kill(sleepPid, 0) != nil {
		t.Fatalf("grandchild %q is not running", line)
	}
	w.Close() // the bridge died
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		p.SignalGroup(syscall.SIGKILL)
		t.Fatal("the watcher did not end after its parent's pipe closed")
	}
	if got, want := p.Code(), 128+int(syscall.SIGKILL); got != want {
		t.Errorf("watcher exit code %d, want %d", got, want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(sleepPid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(sleepPid, syscall.SIGKILL)
			t.Fatal("the grandchild outlived its parent's death")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestParentWatcherPassesExit checks that, while the parent lives, the
// watcher ends as its command did: exit code, signal, and a command that
// cannot start.
func TestParentWatcherPassesExit(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cases := []struct {
		argv   []string
		signal bool
		want   int
	}{
		{[]string{"sh", "-c", "exit 7"}, false, 7},
		{[]string{"sh", "-c", "echo ok"}, false, 0},
		{[]string{"sleep", "300"}, true, 128 + int(syscall.SIGTERM)},
	}
	for _, c := range cases {
		cmd := exec.Command(c.argv[0], c.argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		p, err := startWatched(cmd, r)
		if err != nil {
			t.Fatal(err)
		}
		// SIGTERM is sent again until the watcher exits: one that lands
		// before the watcher started its command has nothing to forward to.
		var term <-chan time.Time
		if c.signal {
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			term = tick.C
		}
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case <-p.Exited():
				break wait
			case <-term:
				p.SignalGroup(syscall.SIGTERM)
			case <-deadline:
				p.SignalGroup(syscall.SIGKILL)
				<-p.Exited()
				break wait
			}
		}
		if got := p.Code(); got != c.want {
			t.Errorf("%q under the watcher: exit %d, want %d", c.argv, got, c.want)
		}
	}
	cmd := exec.Command("no-such-command-anywhere")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if _, err := startWatched(cmd, r); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing command: err %v, want exec.ErrNotFound", err)
	}
}
