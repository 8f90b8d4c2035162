package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/sgpool"
)

// PodSecurityGroups decides, at ADD, the security-group set of a pod (security groups for pods,
// ENABLE_POD_ENI; the agent wires controller/podsg): the union of the groups of the SecurityGroupPolicies
// that select it, and their names. No groups: the pod takes the default pool. An error fails the ADD (the
// runtime retries it). Started and Stopped tell it which set a running pod was given (at ADD, and for every
// pod the books hold after a restart), so that a policy changed under running pods can be reported;
// Refused, why the node could give a pod of a set no address (an Event on the pod).
type PodSecurityGroups interface {
	SecurityGroupsOf(ctx context.Context, namespace, name, uid string) (groups, policies []string, err error)
	Started(namespace, name, uid string, groups []string)
	Stopped(namespace, name, uid string)
	Refused(namespace, name, uid, why string)
}

// ErrPodSecurityGroupsIPv6: security groups for pods take IPv4 addresses of their set's ENIs; in IPv6 and
// dual-stack modes every pod's address is of the primary ENI's /80, which carries the node's groups.
var ErrPodSecurityGroupsIPv6 = errors.New("ENABLE_POD_ENI works in IPv4 mode only: with ENABLE_IPv6 or dual-stack " +
	"every pod's address is of the primary ENI's /80, whose groups are the node's")

// podSet is the set an ADD's pod belongs to: its groups (none: the default pool) and the policies that
// chose them.
type podSet struct{ groups, policies []string }

// setOf asks the PodSecurityGroups for the pod's set. A pod without a name (no Kubernetes pod) and a node
// without security groups for pods take the default pool.
func (p *ipam) setOf(ctx context.Context, namespace, name, uid string) (podSet, error) {
	if p.podGroups == nil || name == "" {
		return podSet{}, nil
	}
	groups, policies, err := p.podGroups.SecurityGroupsOf(ctx, namespace, name, uid)
	if err != nil {
		return podSet{}, fmt.Errorf("%w: deciding the security groups of pod %s/%s: %v", ErrNoIP, namespace, name, err)
	}
	return podSet{groups: sgpool.Normalize(groups), policies: policies}, nil
}

// waitForSetIP is waitForIP for a pod of a security-group set: it takes a free address of an ENI of the
// set, waiting while the pool brings one (the set's first pod waits for the ENI's commit), at most addWait.
// Each set waits on its own (sgpool.Line), so no other pod waits behind it. It fails at once when the pods
// hold max pods' worth of IPs, or when the set cannot get an address (no ENI slot, EC2 refusing the set's
// groups: the pool's word, naming the policies and the set). Called with the books' lock held; returns with
// it held when it found an address, released on an error.
func (p *ipam) waitForSetIP(ctx context.Context, t *turn, s podSet) (now time.Time, view *pool.View, ip string, e *journal.ENI, err error) {
	w := p.sets.Join(s.groups, s.policies)
	defer p.sets.Leave(w)
	var deadline <-chan time.Time
	for {
		now = p.clock.Now()
		view = pool.NewView(p.books.st, now)
		if ready, _ := p.ready(); ready {
			var ok bool
			if ip, e, ok = view.PickInSet(w.Set(), p.avail); ok {
				return now, view, ip, e, nil
			}
		}
		switch assigned := len(p.books.st.Assignments); {
		case assigned >= p.targets.MaxPods:
			err = maxPodsReached(assigned, p.targets.MaxPods)
		case p.sets.Blocked(w.Set(), now) != "":
			err = fmt.Errorf("%w: security-group set %s (SecurityGroupPolicy %s): %s", ErrNoIP, w.Set(),
				strings.Join(s.policies, ", "), p.sets.Blocked(w.Set(), now))
		case p.addWait < 0:
			err = fmt.Errorf("%w: the ENI of security-group set %s is on its way", ErrNoIP, w.Set())
		}
		p.books.mu.Unlock()
		if err != nil {
			p.metrics.assigns.WithLabelValues(assignOutcome(err)).Inc()
			return now, nil, "", nil, err
		}
		if deadline == nil {
			deadline = p.clock.After(p.addWait)
			p.wake() // once: the Run loop pokes the sets' waiters after each round
		}
		select {
		case <-w.Poked():
			p.books.mu.Lock()
			continue
		case <-ctx.Done():
			err = ctx.Err()
			if t.superseded.Load() {
				err = errSuperseded
			}
			err = fmt.Errorf("waiting for an IP of security-group set %s: %w", w.Set(), err)
		case <-deadline:
			err = fmt.Errorf("%w: no address of security-group set %s (SecurityGroupPolicy %s) came within ENIWIRE_ADD_WAIT (%s)",
				ErrNoIP, w.Set(), strings.Join(s.policies, ", "), p.addWait)
			if why := p.poolStatus(); why != "" {
				err = fmt.Errorf("%w; pool: %s", err, why)
			}
		}
		p.metrics.assigns.WithLabelValues("no_ip").Inc()
		return now, nil, "", nil, err
	}
}

// tellRunningSets tells the PodSecurityGroups the set of every pod the books hold on a set's ENI, at start:
// a policy changed while the agent was down is then reported for them too.
func (p *ipam) tellRunningSets() {
	if p.podGroups == nil {
		return
	}
	type started struct {
		ns, name, uid string
		groups        []string
	}
	var pods []started
	p.books.View(func(st *journal.State) {
		for _, a := range st.Assignments {
			if e := st.ENIByID(a.ENI); e != nil && e.GroupSet != "" && a.PodName != "" {
				pods = append(pods, started{a.PodNamespace, a.PodName, a.PodUID, sgpool.Groups(e.GroupSet)})
			}
		}
	})
	for _, s := range pods {
		p.podGroups.Started(s.ns, s.name, s.uid, s.groups)
	}
}
