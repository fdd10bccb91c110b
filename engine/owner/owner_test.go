package owner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOwner checks the CTR-4 label format host/pid/start-ms/lock=<path>,
// that the start time is this process's (recent, not in the future) and
// that the lock file is in the shared owners directory.
func TestOwner(t *testing.T) {
	host, _ := os.Hostname()
	owner, lock, ok := strings.Cut(Label(), lockMark)
	if !ok || filepath.Dir(lock) != LockDir() || !strings.HasSuffix(lock, ".lock") {
		t.Fatalf("Label() = %q, want .../lock=%s/<pid>-<id>.lock", Label(), LockDir())
	}
	parts := strings.Split(owner, "/")
	if len(parts) != 3 || parts[0] != host || parts[1] != strconv.Itoa(os.Getpid()) {
		t.Fatalf("Label() = %q, want %s/%d/<start ms>", owner, host, os.Getpid())
	}
	start, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		t.Fatalf("Label() = %q: start %v", owner, err)
	}
	now := time.Now()
	if lo, hi := now.Add(-time.Hour).UnixMilli(), now.Add(2*time.Second).UnixMilli(); start < lo || start > hi {
		t.Errorf("Label() start %d (%s) is not within the last hour", start, time.UnixMilli(start))
	}
	if again, _, _ := strings.Cut(Label(), lockMark); again != owner {
		t.Errorf("Label() changed from %q to %q", owner, again)
	}
}

// TestOwnerAlive checks CTR-4 liveness: this process's label is alive, in
// both forms; a label whose lock file is gone is dead; a label of a dead pid, or of a live pid with another start time (pid reuse),
// is dead; labels of other hosts and malformed labels count as alive.
func TestOwnerAlive(t *testing.T) {
	host, _ := os.Hostname()

	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	childOwner := fmt.Sprintf("%s/%d/%d", host, pid, StartMs(pid))
	childAlive := Alive(childOwner)
	_ = child.Process.Kill()
	_ = child.Wait()

	own := Label()
	ownBase, _, _ := strings.Cut(own, lockMark)
	ownStart, _ := strconv.ParseInt(ownBase[strings.LastIndexByte(ownBase, '/')+1:], 10, 64)
	gone := filepath.Join(t.TempDir(), "gone.lock")
	tests := []struct {
		name  string
		owner string
		want  bool
	}{
		{"own label", own, true},
		{"own label, old form", ownBase, true},
		{"lock file gone", fmt.Sprintf("%s/%d/%d%s%s", host, os.Getpid(), ownStart, lockMark, gone), false},
		{"other host, lock file gone", fmt.Sprintf("other.example/1/1%s%s", lockMark, gone), true},
		{"own pid, other start time (reused pid)", fmt.Sprintf("%s/%d/%d", host, os.Getpid(), ownStart+1000), false},
		{"exited child", childOwner, false},
		{"pid that cannot exist", fmt.Sprintf("%s/%d/%d", host, 1<<30, ownStart), false},
		{"other host, dead pid", fmt.Sprintf("%s-elsewhere/%d/%d", host, pid, ownStart), true},
		{"other host, own pid", fmt.Sprintf("other.example/%d/1", os.Getpid()), true},
		{"empty", "", true},
		{"no slashes", "garbage", true},
		{"two parts", host + "/1", true},
		{"four parts", fmt.Sprintf("%s/%d/%d/x", host, 1<<30, ownStart), true},
		{"pid not a number", host + "/abc/1", true},
		{"start not a number", fmt.Sprintf("%s/%d/abc", host, 1<<30), true},
		{"empty pid and start", host + "//", true},
	}
	if !childAlive {
		t.Errorf("Alive(%q) of a running child = false, want true", childOwner)
	}
	for _, tt := range tests {
		if got := Alive(tt.owner); got != tt.want {
			t.Errorf("%s: Alive(%q) = %v, want %v", tt.name, tt.owner, got, tt.want)
		}
	}
}

// TestOwnerLock checks the lock that proves a bridge alive: held while its
// holder keeps it, free (and pruned) after; a held lock is never pruned.
func TestOwnerLock(t *testing.T) {
	dir := t.TempDir()
	path, f, err := takeOwnerLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	label := fmt.Sprintf("%s/1/1%s%s", host, lockMark, path)
	if !ownerLockHeld(path) || !Alive(label) {
		t.Fatalf("lock %s not held while its file is open", path)
	}
	pruneOwnerLocks(dir)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a held lock was pruned: %v", err)
	}
	// A second descriptor of the same file is another holder, as another
	// bridge process would be.
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(g.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Fatal("a second exclusive lock succeeded while the first is held")
	}
	g.Close()
	f.Close() // the bridge died
	if ownerLockHeld(path) || Alive(label) {
		t.Fatalf("lock %s still held after its holder closed it", path)
	}
	pruneOwnerLocks(dir)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a free lock was not pruned: %v", err)
	}
	if Alive(label) {
		t.Fatalf("Alive(%q) = true after its lock file was pruned", label)
	}
}
