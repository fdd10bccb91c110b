package kube

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The bridge's Lease: renewed every leaseRenew, it expires leaseDuration
// after the bridge's last renewal. Every live bridge sweeps every
// sweepEvery (and when it starts): the pods of an owner whose Lease expired
// or is missing are deleted, so a dead bridge's pods are gone within
// leaseDuration+sweepEvery of its death, and within sweepEvery of the
// later of the Lease's expiry and a live bridge starting.
const (
	leaseDuration = 15 * time.Second
	leaseRenew    = 5 * time.Second
	sweepEvery    = 10 * time.Second
	// orphanAge spares the pods of a bridge that has not yet written its
	// first Lease (Start may run before Serve).
	orphanAge = 30 * time.Second
)

// SweptWithin bounds how long a dead bridge's pods outlive it while
// another bridge of the namespace runs: its Lease expires, then a sweep.
const SweptWithin = leaseDuration + sweepEvery + leaseRenew

// leaseName is the Lease of owner id.
func leaseName(id string) string { return "bridge-" + id }

// Serve runs the bridge's side of the cluster until ctx ends: the Lease,
// the sweep of dead bridges' pods and the warm pool. On the way out the
// pool's pods and the Lease are deleted. A cluster it cannot reach is
// logged; each Start then reports it.
func (l *Launcher) Serve(ctx context.Context) error {
	c, err := l.connect()
	if err != nil {
		l.log.Warn().Err(err).Msg("kubernetes backend")
		<-ctx.Done()
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.fillPool(ctx, c)
	}()
	renew := time.NewTicker(leaseRenew)
	defer renew.Stop()
	lease := l.renewLease(ctx, c, nil)
	l.sweep(ctx, c)
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			l.stopped = true
			l.mu.Unlock()
			wg.Wait()
			l.drainPool(c)
			l.removeOwn(c)
			dctx, cancel := context.WithTimeout(context.Background(), deleteBound)
			_ = c.leases.Delete().Namespace(c.namespace).Resource("leases").Name(leaseName(l.owner)).Do(dctx).Error()
			cancel()
			return ctx.Err()
		case <-renew.C:
			lease = l.renewLease(ctx, c, lease)
			if time.Since(lastSweep) >= sweepEvery {
				l.sweep(ctx, c)
				lastSweep = time.Now()
			}
		}
	}
}

// renewLease creates or renews the bridge's Lease; it returns the stored
// Lease (nil after an error, so the next renewal reads it again).
func (l *Launcher) renewLease(ctx context.Context, c *clients, prev *coordinationv1.Lease) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	rctx, cancel := context.WithTimeout(ctx, deleteBound)
	defer cancel()
	var out coordinationv1.Lease
	var err error
	if prev == nil {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: leaseName(l.owner), Labels: map[string]string{LabelManagedBy: ManagedBy, LabelOwner: l.owner}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.cfg.Owner), LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
				AcquireTime: &now, RenewTime: &now},
		}
		err = c.leases.Post().Namespace(c.namespace).Resource("leases").Body(lease).Do(rctx).Into(&out)
		if err != nil && !isAlreadyExists(err) {
			l.log.Warn().Err(l.apiError(c, "create lease", err)).Msg("kubernetes: the bridge's lease")
			return nil
		}
		if err != nil {
			err = c.leases.Get().Namespace(c.namespace).Resource("leases").Name(leaseName(l.owner)).Do(rctx).Into(&out)
			if err != nil {
				return nil
			}
			prev = &out
		} else {
			return &out
		}
	}
	next := prev.DeepCopy()
	next.Spec.RenewTime = &now
	if err = c.leases.Put().Namespace(c.namespace).Resource("leases").Name(next.Name).Body(next).Do(rctx).Into(&out); err != nil {
		l.log.Debug().Err(err).Msg("kubernetes: renew lease")
		return nil
	}
	return &out
}

// sweep deletes the pods of bridges whose Lease expired or is missing.
func (l *Launcher) sweep(ctx context.Context, c *clients) {
	sctx, cancel := context.WithTimeout(ctx, 2*deleteBound)
	defer cancel()
	var pods corev1.PodList
	err := c.core.Get().Namespace(c.namespace).Resource("pods").
		VersionedParams(&metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy}, c.params).Do(sctx).Into(&pods)
	if err != nil {
		l.log.Debug().Err(err).Msg("kubernetes: sweep: list pods")
		return
	}
	alive := map[string]bool{l.owner: true}
	for _, p := range pods.Items {
		id := p.Labels[LabelOwner]
		live, seen := alive[id]
		if !seen {
			live = l.ownerAlive(sctx, c, id)
			alive[id] = live
		}
		if live || (time.Since(p.CreationTimestamp.Time) < orphanAge && !l.leaseExists(sctx, c, id)) {
			continue
		}
		l.log.Info().Str("pod", p.Name).Str("owner", id).Msg("kubernetes: removing a dead bridge's sandbox pod")
		l.deletePodCtx(sctx, c, p.Name)
	}
	for id, live := range alive {
		if !live {
			_ = c.leases.Delete().Namespace(c.namespace).Resource("leases").Name(leaseName(id)).Do(sctx).Error()
		}
	}
}

// ownerAlive reports whether owner id's Lease is current.
func (l *Launcher) ownerAlive(ctx context.Context, c *clients, id string) bool {
	var lease coordinationv1.Lease
	err := c.leases.Get().Namespace(c.namespace).Resource("leases").Name(leaseName(id)).Do(ctx).Into(&lease)
	if err != nil {
		// Unknown (not NotFound) keeps the pods: a flaky API never sweeps a live bridge.
		return !isNotFound(err)
	}
	return leaseCurrent(lease.Spec)
}

// leaseCurrent reports whether a Lease was renewed within its duration; one
// without either has never been current.
func leaseCurrent(spec coordinationv1.LeaseSpec) bool {
	if spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return false
	}
	return time.Since(spec.RenewTime.Time) < time.Duration(*spec.LeaseDurationSeconds)*time.Second
}

// leaseExists reports whether owner id has a Lease at all (expired or not).
func (l *Launcher) leaseExists(ctx context.Context, c *clients, id string) bool {
	err := c.leases.Get().Namespace(c.namespace).Resource("leases").Name(leaseName(id)).Do(ctx).Error()
	return err == nil || !isNotFound(err)
}

// fillPool keeps cfg.WarmPool started pods in the pool until ctx ends.
func (l *Launcher) fillPool(ctx context.Context, c *clients) {
	for {
		if len(l.pool) < cap(l.pool) {
			sctx, cancel := context.WithTimeout(ctx, l.startTimeout)
			name, err := l.startPod(sctx, c, nil)
			cancel()
			switch {
			case err == nil:
				l.pool <- name // never blocks: only this goroutine adds
				continue
			case ctx.Err() == nil:
				l.log.Warn().Err(err).Msg("kubernetes: warm pool")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-l.taken:
		case <-time.After(sweepEvery): // retry after an error
		}
	}
}

// removeOwn deletes every pod this bridge still owns when it stops: a
// sandbox whose start ended after the sessions stopped would otherwise
// wait for another bridge's sweep. Starts after this fail (stopped).
func (l *Launcher) removeOwn(c *clients) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*deleteBound)
	defer cancel()
	var pods corev1.PodList
	err := c.core.Get().Namespace(c.namespace).Resource("pods").
		VersionedParams(&metav1.ListOptions{LabelSelector: LabelOwner + "=" + l.owner}, c.params).Do(ctx).Into(&pods)
	if err != nil {
		l.log.Warn().Err(err).Msg("kubernetes: list this bridge's pods")
		return
	}
	for _, p := range pods.Items {
		l.deletePodCtx(ctx, c, p.Name)
	}
}

// drainPool deletes the pool's pods.
func (l *Launcher) drainPool(c *clients) {
	for {
		select {
		case name := <-l.pool:
			l.deletePod(c, name)
		default:
			return
		}
	}
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
