package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Errors Assign, Release and Check return; the agent maps them to API error codes.
var (
	// ErrNoIP: the warm pool is empty; the pool manager has been woken. Retryable.
	ErrNoIP = errors.New("no free IP in the warm pool")
	// ErrNotReady: the first answer from EC2 has not come yet. Retryable.
	ErrNotReady = errors.New("controller not ready")
	// ErrNotFound: no assignment for the attachment.
	ErrNotFound = errors.New("no assignment for the attachment")
	// ErrBadRequest: a required field is missing.
	ErrBadRequest = errors.New("bad request")
)

func validAttachment(a api.Attachment) error {
	if a.ContainerID == "" || a.IfName == "" {
		return fmt.Errorf("%w: containerID and ifName are required", ErrBadRequest)
	}
	return nil
}

// Assign gives the attachment an IP from the warm pool, journals it, sets up the datapath and returns it. It
// never waits on EC2. A repeated request for the same attachment returns the same assignment.
func (n *Node) Assign(ctx context.Context, req api.AssignRequest) (*api.Assignment, error) {
	if err := validAttachment(req.Attachment); err != nil {
		return nil, err
	}
	if ok, why := n.Ready(); !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotReady, why)
	}
	n.mu.Lock()
	if a := n.st.Assignment(req.ContainerID, req.IfName); a != nil {
		out := n.toAPI(*a)
		seq := n.seq
		n.mu.Unlock()
		// The first request may still be waiting for its commit: this answer waits for it too.
		if err := n.commit(seq, journal.Pod); err != nil {
			return nil, fmt.Errorf("journaling assignment of %s: %w", out.IP, err)
		}
		n.metrics.assigns.WithLabelValues("repeat").Inc()
		return out, n.podUp(ctx, *out)
	}
	now := n.clock.Now()
	ip, e, ok := pool.NewView(n.st, now).Pick()
	if !ok {
		n.mu.Unlock()
		n.Wake()
		n.metrics.assigns.WithLabelValues("no_ip").Inc()
		return nil, ErrNoIP
	}
	a := journal.Assignment{
		ContainerID: req.ContainerID, IfName: req.IfName, Netns: req.Netns, PodNamespace: req.Pod.Namespace,
		PodName: req.Pod.Name, PodUID: req.Pod.UID, HostVeth: req.HostVeth, HostIfindex: req.HostIfindex,
		IP: ip, ENI: e.ID, AssignedAt: now,
	}
	eniID := e.ID
	// The assignment is in the journal before anyone hears of it: written at once (it survives a crash of the
	// agent), fsync'd per the sync policy by the commit below, outside the lock, so concurrent ADDs share one.
	seq, err := n.appendLocked(func(st *journal.State) error {
		st.Assignments = append(st.Assignments, a)
		st.Cooldowns = slices.DeleteFunc(st.Cooldowns, func(c journal.Cooldown) bool { return c.IP == ip })
		return nil
	})
	if err != nil {
		n.mu.Unlock()
		n.metrics.assigns.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("journaling assignment of %s: %w", ip, err)
	}
	out := n.toAPI(a)
	// Wake the pool manager only when this assignment left the pool short; a wake per request would put
	// housekeeping in the way of the next request.
	short := n.targets.Short(n.limits, pool.NewView(n.st, now).Counts()) > 0
	n.mu.Unlock()
	if short {
		n.Wake()
	}
	if err := n.commit(seq, journal.Pod); err != nil {
		// The journal is broken (ErrBroken): the IP stays out of the pool until a restart replays what the
		// disk holds.
		n.metrics.assigns.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("journaling assignment of %s: %w", ip, err)
	}
	if err := n.podUp(ctx, *out); err != nil {
		if _, rerr := n.Release(context.WithoutCancel(ctx), api.ReleaseRequest{Attachment: req.Attachment}); rerr != nil {
			err = errors.Join(err, rerr)
		}
		n.metrics.assigns.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("setting up datapath for %s: %w", ip, err)
	}
	n.metrics.assigns.WithLabelValues("ok").Inc()
	n.log.Info("IP assigned", "container", req.ContainerID, "ifname", req.IfName, "ip", ip, "eni", eniID,
		"pod", req.Pod.Namespace+"/"+req.Pod.Name)
	return out, nil
}

// Release puts the attachment's IP into cooldown and tears its datapath down. Releasing an unknown attachment
// succeeds with Released false.
func (n *Node) Release(ctx context.Context, req api.ReleaseRequest) (*api.ReleaseResponse, error) {
	if err := validAttachment(req.Attachment); err != nil {
		return nil, err
	}
	n.mu.Lock()
	a := n.st.Assignment(req.ContainerID, req.IfName)
	if a == nil {
		n.mu.Unlock()
		n.metrics.releases.WithLabelValues("unknown").Inc()
		return &api.ReleaseResponse{}, nil
	}
	rel := *a
	out := n.toAPI(rel)
	seq, err := n.appendLocked(func(st *journal.State) error {
		st.Assignments = slices.DeleteFunc(st.Assignments, func(x journal.Assignment) bool {
			return x.ContainerID == rel.ContainerID && x.IfName == rel.IfName
		})
		st.Cooldowns = append(st.Cooldowns, journal.Cooldown{IP: rel.IP, ENI: rel.ENI, Until: n.clock.Now().Add(n.cfg.Cooldown)})
		return nil
	})
	n.mu.Unlock()
	if err == nil {
		err = n.commit(seq, journal.Pod)
	}
	if err != nil {
		n.metrics.releases.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("journaling release of %s: %w", rel.IP, err)
	}
	if err := n.dp.PodDown(ctx, n.podOf(*out)); err != nil {
		n.log.Warn("tearing down pod datapath", "ip", rel.IP, "error", err)
	}
	n.metrics.releases.WithLabelValues("ok").Inc()
	n.log.Info("IP released", "container", rel.ContainerID, "ifname", rel.IfName, "ip", rel.IP, "cooldown", n.cfg.Cooldown)
	resp := &api.ReleaseResponse{Released: true, Assignment: out}
	if n.agentRemovesVeth {
		// The plugin's DEL skips its own (slow) deletion of the veth. A Release that found no record leaves the
		// answer as it is, so the plugin deletes what its prevResult names.
		resp.HostVethRemoval = api.HostVethRemovalAgent
	}
	return resp, nil
}

// Check returns the attachment's assignment, or ErrNotFound.
func (n *Node) Check(_ context.Context, req api.CheckRequest) (*api.Assignment, error) {
	if err := validAttachment(req.Attachment); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	a := n.st.Assignment(req.ContainerID, req.IfName)
	if a == nil {
		return nil, ErrNotFound
	}
	return n.toAPI(*a), nil
}

// Assignments lists every assignment.
func (n *Node) Assignments() []api.Assignment {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]api.Assignment, 0, len(n.st.Assignments))
	for _, a := range n.st.Assignments {
		out = append(out, *n.toAPI(a))
	}
	return out
}

// GC releases every assignment whose attachment is not in valid.
func (n *Node) GC(ctx context.Context, valid []api.Attachment) (*api.GCResponse, error) {
	keep := map[api.Attachment]bool{}
	for _, v := range valid {
		keep[v] = true
	}
	out := &api.GCResponse{Released: []api.Assignment{}}
	var errs []error
	for _, a := range n.Assignments() {
		if keep[a.Attachment] {
			continue
		}
		r, err := n.Release(ctx, api.ReleaseRequest{Attachment: a.Attachment})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r.Released {
			out.Released = append(out.Released, *r.Assignment)
		}
	}
	return out, errors.Join(errs...)
}

// toAPI needs n.mu held (it reads the ENI record).
func (n *Node) toAPI(a journal.Assignment) *api.Assignment {
	out := &api.Assignment{
		Attachment: api.Attachment{ContainerID: a.ContainerID, IfName: a.IfName}, Netns: a.Netns,
		Pod:      api.PodIdentity{Namespace: a.PodNamespace, Name: a.PodName, UID: a.PodUID},
		HostVeth: a.HostVeth, HostIfindex: a.HostIfindex, IP: a.IP, ENI: a.ENI, AssignedAt: a.AssignedAt,
	}
	if e := n.st.ENIByID(a.ENI); e != nil {
		out.ENIMAC, out.DeviceIndex, out.SubnetCIDR = e.MAC, e.DeviceIndex, e.SubnetCIDR
		out.Gateway = Gateway(e.SubnetCIDR)
	}
	return out
}

func (n *Node) podOf(a api.Assignment) dptypes.Pod {
	return dptypes.Pod{ContainerID: a.ContainerID, IfName: a.IfName, Netns: a.Netns, IP: a.IP, HostVeth: a.HostVeth,
		HostIfindex: a.HostIfindex, ENI: dptypes.ENI{ID: a.ENI, MAC: a.ENIMAC, DeviceIndex: a.DeviceIndex,
			SubnetCIDR: a.SubnetCIDR, Gateway: a.Gateway}}
}

func (n *Node) podUp(ctx context.Context, a api.Assignment) error {
	return n.dp.PodUp(ctx, n.podOf(a))
}

// restoreDatapath replays the books into the datapath after a restart.
func (n *Node) restoreDatapath(ctx context.Context) {
	n.syncDatapath(ctx)
	for _, a := range n.Assignments() {
		if err := n.podUp(ctx, a); err != nil {
			n.log.Warn("restoring pod datapath", "ip", a.IP, "container", a.ContainerID, "error", err)
		}
	}
}

// syncDatapath brings ENIs that became usable up and the ones that stopped being usable down.
func (n *Node) syncDatapath(ctx context.Context) {
	usable := map[string]dptypes.ENI{}
	n.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			if e.Usable() && e.ID != "" {
				usable[e.ID] = dptypes.ENI{ID: e.ID, MAC: e.MAC, DeviceIndex: e.DeviceIndex, Primary: e.Primary,
					SubnetCIDR: e.SubnetCIDR, Gateway: Gateway(e.SubnetCIDR)}
			}
		}
	})
	for id, e := range usable {
		if _, up := n.enisUp[id]; up {
			continue
		}
		if err := n.dp.ENIUp(ctx, e); err != nil {
			n.log.Warn("bringing ENI datapath up", "eni", id, "error", err)
			continue
		}
		n.enisUp[id] = e
	}
	for id, e := range n.enisUp {
		if _, ok := usable[id]; ok {
			continue
		}
		if err := n.dp.ENIDown(ctx, e); err != nil {
			n.log.Warn("taking ENI datapath down", "eni", id, "error", err)
			continue
		}
		delete(n.enisUp, id)
	}
}
