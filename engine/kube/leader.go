package kube

// leader.go: bridge serve --leader-elect. Replicas of one deployment share
// the Lease LeaderLease through client-go's leaderelection; the holder
// serves, the others stand by. leaderelection notices a lost Lease only
// after its release attempt, which may take RenewDeadline more, so the
// fence here is a watchdog of its own over each successful renewal.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderLease is the Lease the serving replica holds. Its name cannot be an
// owner's sweep Lease: those are "bridge-" and 16 hex digits.
const LeaderLease = "bridge-leader"

// ElectionTimes are the leader Lease's durations. A standby takes the Lease
// LeaseDuration after it last saw it renewed (or at once after a release);
// the leader renews every RetryPeriod and fences itself (Leadership.Lost)
// once RenewDeadline has passed since its last renewal, LeaseDuration -
// RenewDeadline before any other replica can take the Lease.
type ElectionTimes struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultElectionTimes are client-go's usual values but a shorter retry, so
// a standby takes a released Lease within about a second.
var DefaultElectionTimes = ElectionTimes{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: time.Second}

// Leadership is one replica's part in the election. Run it on a goroutine
// its owner waits for; Leading is closed once this replica holds the Lease,
// Lost once it no longer may act as the leader (a missed renewal, or the
// Lease taken), and never after Run's context ended first.
type Leadership struct {
	identity string
	lock     *renewLock
	times    ElectionTimes
	leading  chan struct{}
	lost     chan struct{}
	lostOnce sync.Once
}

// NewLeadership returns the election of identity for the Lease in the
// launcher's namespace, or an error naming why the cluster cannot be used.
func (l *Launcher) NewLeadership(identity string, times ElectionTimes) (*Leadership, error) {
	c, err := l.connect()
	if err != nil {
		return nil, err
	}
	client, err := coordinationclient.NewForConfig(c.cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: leader lease: %w", err)
	}
	return newLeadership(client, c.namespace, identity, times), nil
}

func newLeadership(client coordinationclient.LeasesGetter, namespace, identity string, times ElectionTimes) *Leadership {
	lock := &renewLock{LeaseLock: resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaderLease, Namespace: namespace},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		Labels:     map[string]string{LabelManagedBy: ManagedBy},
	}, renewed: make(chan time.Time, 1)}
	return &Leadership{identity: identity, lock: lock, times: times, leading: make(chan struct{}), lost: make(chan struct{})}
}

// Identity is this replica's name in the Lease.
func (p *Leadership) Identity() string { return p.identity }

// Leading is closed once this replica holds the Lease.
func (p *Leadership) Leading() <-chan struct{} { return p.leading }

// Lost is closed once this replica, having led, may no longer act as the
// leader: its last renewal is RenewDeadline old, or the election ended
// without ctx's end. It is never closed after Run's ctx ended first (a
// graceful stop, which releases the Lease).
func (p *Leadership) Lost() <-chan struct{} { return p.lost }

// Run takes part in the election until ctx ends, then releases the Lease if
// it holds it and returns. The watchdog that closes Lost runs on a
// goroutine of Run's, which Run waits for.
func (p *Leadership) Run(ctx context.Context) error {
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: p.lock, Name: LeaderLease, ReleaseOnCancel: true,
		LeaseDuration: p.times.LeaseDuration, RenewDeadline: p.times.RenewDeadline, RetryPeriod: p.times.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			// Called on leaderelection's own goroutine, which ends at once.
			OnStartedLeading: func(context.Context) { close(p.leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("kubernetes: leader election: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.watch(ectx)
	}()
	le.Run(ectx) // returns once ctx ends or the Lease is lost
	if ctx.Err() == nil {
		p.loseOnce()
	}
	cancel()
	wg.Wait()
	return nil
}

// watch closes Lost when RenewDeadline passes after the last renewal
// while leading.
func (p *Leadership) watch(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-p.leading:
	}
	// The acquiring write came before leading, and only this loop reads
	// renewed: its time is waiting unless the channel was empty.
	last := time.Now()
	select {
	case last = <-p.lock.renewed:
	default:
	}
	fence := time.NewTimer(time.Until(last.Add(p.times.RenewDeadline)))
	defer fence.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case at := <-p.lock.renewed:
			if at.After(last) {
				last = at
			}
			fence.Reset(time.Until(last.Add(p.times.RenewDeadline)))
		case <-fence.C:
			if ctx.Err() == nil {
				p.loseOnce()
			}
			return
		}
	}
}

func (p *Leadership) loseOnce() { p.lostOnce.Do(func() { close(p.lost) }) }

// renewLock is client-go's LeaseLock that reports the RenewTime of each
// record it wrote as this replica's (a create or an update naming it).
type renewLock struct {
	resourcelock.LeaseLock
	renewed chan time.Time // the latest only: a full channel is drained first
}

var _ resourcelock.Interface = (*renewLock)(nil)

func (r *renewLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := r.LeaseLock.Create(ctx, ler)
	r.report(ler, err)
	return err
}

func (r *renewLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := r.LeaseLock.Update(ctx, ler)
	r.report(ler, err)
	return err
}

// report passes on the RenewTime of a record written for this replica; the
// time was taken before the write, so the fence counts from no later than
// what other replicas saw.
func (r *renewLock) report(ler resourcelock.LeaderElectionRecord, err error) {
	if err != nil || ler.HolderIdentity != r.Identity() {
		return
	}
	at := ler.RenewTime.Time
	for {
		select {
		case r.renewed <- at:
			return
		default:
			select {
			case <-r.renewed:
			default:
			}
		}
	}
}

// LeaderInfo is the leader Lease as bridge doctor reports it.
type LeaderInfo struct {
	Holder  string // "" when released or never held
	Renewed time.Time
	Expired bool
}

// errNoLeaderLease is Leader's error when the namespace has no leader Lease.
var errNoLeaderLease = errors.New("no leader lease")

// Leader reads the leader Lease in the launcher's namespace.
func (l *Launcher) Leader(ctx context.Context) (LeaderInfo, error) {
	c, err := l.connect()
	if err != nil {
		return LeaderInfo{}, err
	}
	var lease coordinationv1.Lease
	err = c.leases.Get().Namespace(c.namespace).Resource("leases").Name(LeaderLease).Do(ctx).Into(&lease)
	if isNotFound(err) {
		return LeaderInfo{}, errNoLeaderLease
	}
	if err != nil {
		return LeaderInfo{}, l.apiError(c, "get lease "+LeaderLease, err)
	}
	info := LeaderInfo{Expired: !leaseCurrent(lease.Spec)}
	if h := lease.Spec.HolderIdentity; h != nil {
		info.Holder = *h
	}
	if t := lease.Spec.RenewTime; t != nil {
		info.Renewed = t.Time
	}
	return info, nil
}

// ReplicaIdentity is a replica's name in the Lease: the host name (a pod's
// name) and a random suffix, so a restarted container is a new candidate
// and waits for its old self's Lease to end like any other.
func ReplicaIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "bridge"
	}
	return host + "_" + randHex(4)
}
