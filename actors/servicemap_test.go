package actors

import (
	"context"
	"testing"
	"time"
)

// blockingService runs until its context ends and records that it stopped.
type blockingService struct{ stopped chan struct{} }

func (b *blockingService) Serve(ctx context.Context) error {
	<-ctx.Done()
	close(b.stopped)
	return ctx.Err()
}

// TestServiceMapRemoveStopsChild: removing a key stops its service and
// forgets it; removing an absent key is a no-op.
func TestServiceMapRemoveStopsChild(t *testing.T) {
	sup := quietSupervisor("map-test")
	serveUntilCleanup(t, sup)
	m := newServiceMap[string, int](sup)
	a, b := &blockingService{make(chan struct{})}, &blockingService{make(chan struct{})}
	m.Add("a", 1, a)
	m.Add("b", 2, b)
	if got, want := m.Len(), 2; got != want {
		t.Fatalf("len %d, want %d", got, want)
	}
	if err := m.Remove("a"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("a still running 5 s after Remove")
	}
	if _, ok := m.Get("a"); ok {
		t.Error("a still in the map")
	}
	if err := m.Remove("a"); err != nil {
		t.Errorf("removing an absent key: %v", err)
	}
	if v, ok := m.Get("b"); !ok || v != 2 {
		t.Errorf("b = %d, %v; want 2, true", v, ok)
	}
}
