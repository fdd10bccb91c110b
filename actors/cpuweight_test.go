package actors

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

func TestPrincipalCPUWeight(t *testing.T) {
	for _, tt := range []struct{ sessions, want int }{
		{0, 1024}, {1, 1024}, {2, 512}, {4, 256}, {3, 341}, {512, 2}, {5000, 2},
	} {
		if got := principalCPUWeight(tt.sessions); got != tt.want {
			t.Errorf("principalCPUWeight(%d) = %d, want %d", tt.sessions, got, tt.want)
		}
	}
}

// weighBox records the weights set on it; fail makes the next set fail.
type weighBox struct {
	Sandbox
	mu      sync.Mutex
	got     []int
	fail    error
	hold    chan struct{} // when set, each set waits for it
	entered chan int      // when set, each set sends its weight first
}

func (b *weighBox) SetCPUWeight(ctx context.Context, w int) error {
	if b.entered != nil {
		b.entered <- w
	}
	if b.hold != nil {
		<-b.hold
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.fail; err != nil {
		b.fail = nil
		return err
	}
	b.got = append(b.got, w)
	return nil
}

func (b *weighBox) sets() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

func weighed(box Sandbox) *sandbox {
	s := &sandbox{box: box, log: zerolog.Nop()}
	s.life, s.endLife = context.WithCancelCause(context.Background())
	return s
}

// TestSandboxWeigh: a weight is set only when it changes (a sandbox starts
// at the full weight), the latest wanted weight wins over those wanted
// while an update ran, a failed update is tried again at the next call,
// and a backend without weights is never asked.
func TestSandboxWeigh(t *testing.T) {
	box := &weighBox{}
	s := weighed(box)
	s.weigh(FullCPUWeight) // the runtime's default: nothing to set
	s.wg.Wait()
	if got := box.sets(); len(got) != 0 {
		t.Fatalf("full weight on a new sandbox: set %v, want nothing", got)
	}
	s.weigh(512)
	s.wg.Wait()
	s.weigh(512)
	s.wg.Wait()
	if got, want := box.sets(), []int{512}; !slices.Equal(got, want) {
		t.Fatalf("sets %v, want %v", got, want)
	}

	// Weights wanted while an update runs: only the latest is applied next.
	box.hold, box.entered = make(chan struct{}), make(chan int, 4)
	s.weigh(256)
	<-box.entered // the update of 256 runs
	s.weigh(341)
	s.weigh(128)
	close(box.hold)
	s.wg.Wait()
	box.hold, box.entered = nil, nil
	if got, want := box.sets(), []int{512, 256, 128}; !slices.Equal(got, want) {
		t.Fatalf("sets %v, want %v", got, want)
	}

	box.fail = errors.New("update failed")
	s.weigh(FullCPUWeight)
	s.wg.Wait()
	s.weigh(FullCPUWeight)
	s.wg.Wait()
	if got, want := box.sets(), []int{512, 256, 128, FullCPUWeight}; !slices.Equal(got, want) {
		t.Fatalf("after a failed update: sets %v, want %v", got, want)
	}

	// A closed sandbox sets nothing more.
	s.endLife(errSandboxEnded)
	s.weigh(2)
	s.wg.Wait()
	if got := box.sets(); len(got) != 4 {
		t.Fatalf("after close: sets %v", got)
	}

	// A backend without weights.
	plain := weighed(&pipeBox{})
	plain.weigh(2)
	plain.wg.Wait()
}
