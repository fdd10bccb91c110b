package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// cutLeases is a LeasesGetter whose calls fail while cut is set: a replica
// partitioned from the API server.
type cutLeases struct {
	coordinationclient.LeasesGetter
	cut *atomic.Bool
}

func (c cutLeases) Leases(ns string) coordinationclient.LeaseInterface {
	return cutLease{c.LeasesGetter.Leases(ns), c.cut}
}

type cutLease struct {
	coordinationclient.LeaseInterface
	cut *atomic.Bool
}

var errCut = errors.New("connection refused")

func (c cutLease) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.LeaseInterface.Get(ctx, name, o)
}

func (c cutLease) Create(ctx context.Context, l *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.LeaseInterface.Create(ctx, l, o)
}

func (c cutLease) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.LeaseInterface.Update(ctx, l, o)
}

// elected runs p until the test's bubble ends it, and returns the time each
// of its channels closed, read once the bubble is idle.
func elected(ctx context.Context, p *Leadership, done chan<- struct{}) (leading, lost *time.Time) {
	leading, lost = new(time.Time), new(time.Time)
	go func() {
		defer close(done)
		_ = p.Run(ctx)
	}()
	go func() {
		select {
		case <-p.Leading():
			*leading = time.Now()
		case <-ctx.Done():
			return
		}
		select {
		case <-p.Lost():
			*lost = time.Now()
		case <-ctx.Done():
		}
	}()
	return leading, lost
}

// TestLeadershipFence: a leader cut off from the API server fences itself
// (Lost) RenewDeadline after its last renewal, before the standby can take
// the Lease, which it then does.
func TestLeadershipFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset().CoordinationV1()
		var cut atomic.Bool
		times := DefaultElectionTimes
		a := newLeadership(cutLeases{client, &cut}, "bridge", "a", times)
		b := newLeadership(client, "bridge", "b", times)
		ctx, cancel := context.WithCancel(t.Context())
		doneA, doneB := make(chan struct{}), make(chan struct{})
		aLeads, aLost := elected(ctx, a, doneA)
		time.Sleep(100 * time.Millisecond) // a first
		bLeads, bLost := elected(ctx, b, doneB)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if aLeads.IsZero() || !bLeads.IsZero() {
			t.Fatalf("after 5 s: a leads %v, b leads %v; want a only", !aLeads.IsZero(), !bLeads.IsZero())
		}
		cutAt := time.Now()
		cut.Store(true)
		time.Sleep(times.LeaseDuration + 3*times.RetryPeriod)
		synctest.Wait()
		switch {
		case aLost.IsZero():
			t.Fatal("a, cut off, never fenced itself")
		case bLeads.IsZero():
			t.Fatal("b never took the Lease")
		case !aLost.Before(*bLeads):
			t.Errorf("a fenced at %v, b led at %v: want the fence first", aLost.Sub(cutAt), bLeads.Sub(cutAt))
		}
		if got, max := aLost.Sub(cutAt), times.RenewDeadline; got > max {
			t.Errorf("a fenced %v after its last chance to renew, want at most %v", got, max)
		}
		if !bLost.IsZero() {
			t.Error("b lost the Lease it took")
		}
		cancel()
		<-doneA
		<-doneB
	})
}

// TestLeadershipRelease: a leader whose context ends releases the Lease
// without fencing, and the standby takes it within a few retries, not a
// LeaseDuration.
func TestLeadershipRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset().CoordinationV1()
		times := DefaultElectionTimes
		a := newLeadership(client, "bridge", "a", times)
		b := newLeadership(client, "bridge", "b", times)
		actx, stopA := context.WithCancel(t.Context())
		ctx, cancel := context.WithCancel(t.Context())
		doneA, doneB := make(chan struct{}), make(chan struct{})
		_, aLost := elected(actx, a, doneA)
		time.Sleep(100 * time.Millisecond)
		bLeads, _ := elected(ctx, b, doneB)
		time.Sleep(5 * time.Second)
		stoppedAt := time.Now()
		stopA()
		<-doneA
		time.Sleep(times.LeaseDuration)
		synctest.Wait()
		if !aLost.IsZero() {
			t.Error("a, stopped, reported a lost Lease")
		}
		if bLeads.IsZero() {
			t.Fatal("b never took the released Lease")
		}
		if got, max := bLeads.Sub(stoppedAt), 3*times.RetryPeriod; got > max {
			t.Errorf("b took the released Lease %v after a stopped, want at most %v", got, max)
		}
		cancel()
		<-doneB
	})
}
