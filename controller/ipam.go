package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/sgpool"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/clock"
)

// Errors Assign, Release and Check return; the agent maps them to API error codes.
var (
	// ErrNoIP: the warm pool is empty, and either no IP came within the ADD's wait or the node cannot get one
	// soon; the error names the cause and what fixes it. Retryable.
	ErrNoIP = errors.New("no free IP in the warm pool")
	// ErrMaxPods: the pods hold as many IPs as max pods allows, and the pool holds no free one; the error says
	// the numbers. Retryable once pods leave.
	ErrMaxPods = errors.New("max pods reached")
	// ErrNotReady: the first answer from EC2 has not come yet. Retryable.
	ErrNotReady = errors.New("controller not ready")
	// ErrNotFound: no assignment for the attachment.
	ErrNotFound = errors.New("no assignment for the attachment")
	// ErrBadRequest: a required field is missing.
	ErrBadRequest = errors.New("bad request")
)

// ipam hands pod IPs out of the warm pool and takes them back, over the books and the datapath. Who may touch
// it: any goroutine (the agent API's handlers call it concurrently). It keeps no state of its own beyond its
// settings; every change goes through the books' lock and journal.
type ipam struct {
	books *books
	dp    dptypes.Driver
	// gate, if set, is passed before an ADD's pod comes up (PodGate).
	gate PodGate
	// removesVeth: the datapath removes released pods' host veths (asked once, when the node was built), so
	// a Release tells the plugin's DEL to skip its own deletion.
	removesVeth bool
	cooldown    time.Duration
	targets     pool.Targets
	limits      pool.Limits
	clock       clock.Clock
	log         *slog.Logger
	metrics     *metrics
	// ready says whether the node may hand out IPs; wake asks the pool manager to look at the pool.
	ready func() (bool, string)
	wake  func()
	// poolStatus is the node's status line (why the pool is short of its targets, or "").
	poolStatus func() string
	// blocked is why the pool cannot bring an IP soon (the pool manager's word, naming the fix), or "".
	blocked func(now time.Time) string
	// addWait bounds an ADD's wait for the IPs the pool is bringing; line is the ADDs waiting (addwait.go).
	addWait time.Duration
	line    addLine

	// podMTU is what every answer tells the plugin to set on the pod's veth.
	podMTU int
	// avail says whether a free IP can be served now (see pool.View.Pick).
	avail func(eniID, ip string) bool

	// turns puts the requests for one attachment in line (turns.go).
	turns attachmentTurns
	// ipv6: pods take addresses of the primary ENI's /80 (Config.EnableIPv6; pick).
	ipv6 bool
	// dual: pods take an IPv4 of the warm pool and an address of the primary ENI's /80 (Config.DualStack).
	dual bool
	// podGroups decides each pod's security-group set (nil: security groups for pods are off); sets is the
	// ADDs waiting for an address of their set (setwait.go).
	podGroups PodSecurityGroups
	sets      *sgpool.Line
	// strictSets: the sets' pods take the VPC's way for every packet (Config.PodSecurityGroupsStandard off).
	strictSets bool
}

func validAttachment(a api.Attachment) error {
	if a.ContainerID == "" || a.IfName == "" {
		return fmt.Errorf("%w: containerID and ifName are required", ErrBadRequest)
	}
	return nil
}

// Assign gives the attachment an IP from the warm pool, journals it, sets up the datapath and returns it. When
// the pool is empty it waits, first come first served, for the IPs the pool manager is bringing, at most
// addWait (a DEL of the attachment ends the wait); when the node cannot get an IP soon it answers at once with
// the cause (waitForIP). A repeated request for the same attachment returns the same assignment.
func (p *ipam) Assign(ctx context.Context, req api.AssignRequest) (*api.Assignment, error) {
	if err := validAttachment(req.Attachment); err != nil {
		return nil, err
	}
	// Before EC2's first answer an ADD may wait for it, as for a refill (waitForIP); a broken journal, never.
	if ok, why := p.ready(); !ok && (p.addWait < 0 || p.books.Broken() != nil) {
		return nil, fmt.Errorf("%w: %s", ErrNotReady, why)
	}
	// A retry waits for the attempt ahead of it; a DEL that comes meanwhile supersedes both.
	t, ctx, err := p.turns.take(ctx, req.Attachment, true)
	if err != nil {
		return nil, fmt.Errorf("assigning an IP to %s: %w", req.ContainerID, err)
	}
	defer p.turns.finish(req.Attachment, t)
	set, err := p.setOf(ctx, req.Pod.Namespace, req.Pod.Name, req.Pod.UID)
	if err != nil {
		p.metrics.assigns.WithLabelValues("no_ip").Inc()
		return nil, fmt.Errorf("assigning an IP to %s: %w", req.ContainerID, err)
	}
	inSet := len(set.groups) > 0
	if inSet {
		p.books.mu.Lock()
	} else {
		p.line.arrive() // the default pool's demand
		p.books.mu.Lock()
		p.line.arrived()
	}
	if a := p.books.st.Assignment(req.ContainerID, req.IfName); a != nil {
		out := p.toAPI(*a)
		seq := p.books.seq
		p.books.mu.Unlock()
		// The first request may still be waiting for its commit: this answer waits for it too.
		if err := p.books.commit(seq, journal.Pod); err != nil {
			return nil, fmt.Errorf("journaling assignment of %s: %w", out.IP, err)
		}
		p.metrics.assigns.WithLabelValues("repeat").Inc()
		if err := p.podStart(ctx, *out); err != nil {
			return nil, err
		}
		return out, supersededErr(t, out.IP)
	}
	var (
		now      time.Time
		view     *pool.View
		ip, ipv6 string
		e        *journal.ENI
	)
	if inSet {
		if now, view, ip, e, err = p.waitForSetIP(ctx, t, set); err != nil && errors.Is(err, ErrNoIP) {
			p.podGroups.Refused(req.Pod.Namespace, req.Pod.Name, req.Pod.UID, err.Error())
		}
	} else {
		now, view, ip, ipv6, e, err = p.waitForIP(ctx, t)
	}
	if err != nil {
		return nil, err
	}
	a := journal.Assignment{
		ContainerID: req.ContainerID, IfName: req.IfName, Network: req.Network, Netns: req.Netns, PodNamespace: req.Pod.Namespace,
		PodName: req.Pod.Name, PodUID: req.Pod.UID, HostVeth: req.HostVeth, HostIfindex: req.HostIfindex,
		IP: ip, IPv6: ipv6, ENI: e.ID, AssignedAt: now,
	}
	if p.ipv6 {
		if a.EgressIP, err = pickEgressIP(p.books.st, now); err != nil {
			p.books.mu.Unlock()
			p.metrics.assigns.WithLabelValues("error").Inc()
			return nil, fmt.Errorf("assigning an IP to %s: %w", req.ContainerID, err)
		}
	}
	eniID := e.ID
	// The assignment is in the journal before anyone hears of it: written at once (it survives a crash of the
	// agent), fsync'd per the sync policy by the commit below, outside the lock, so concurrent ADDs share one.
	seq, err := p.books.appendLocked(func(st *journal.State) error {
		st.Assignments = append(st.Assignments, a)
		st.Cooldowns = slices.DeleteFunc(st.Cooldowns, func(c journal.Cooldown) bool { return c.IP == ip || (ipv6 != "" && c.IP == ipv6) })
		return nil
	})
	if err != nil {
		p.books.mu.Unlock()
		p.metrics.assigns.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("journaling assignment of %s: %w", ip, err)
	}
	out := p.toAPI(a)
	// Wake the pool manager only when this assignment left the pool short; a wake per request would put
	// housekeeping in the way of the next request.
	view.Assigned(ip)
	if ipv6 != "" {
		view.Assigned(ipv6)
	}
	// A set's pod took one of its set's addresses: the set's pool looks whether to bring the next.
	short := inSet || !p.ipv6 && p.targets.Short(p.limits, view.Counts()) > 0
	p.books.mu.Unlock()
	if short {
		p.wake()
	}
	if err := p.books.commit(seq, journal.Pod); err != nil {
		// The journal is broken (ErrBroken): the IP stays out of the pool until a restart replays what the
		// disk holds.
		p.metrics.assigns.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("journaling assignment of %s: %w", ip, err)
	}
	err = p.podStart(ctx, *out)
	if t.superseded.Load() {
		// The DEL waiting behind this ADD releases the IP and tears the datapath down.
		p.metrics.assigns.WithLabelValues("error").Inc()
		return nil, supersededErr(t, ip)
	}
	if err != nil {
		// Nobody has heard of this IP yet, so no connection can have used it: it goes back without cooldown.
		if _, rerr := p.release(context.WithoutCancel(ctx), req.Attachment, false); rerr != nil {
			err = errors.Join(err, rerr)
		}
		p.metrics.assigns.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("setting up datapath for %s: %w", ip, err)
	}
	if inSet {
		p.podGroups.Started(req.Pod.Namespace, req.Pod.Name, req.Pod.UID, set.groups)
	}
	p.metrics.assigns.WithLabelValues("ok").Inc()
	p.log.Info("IP assigned", "container", req.ContainerID, "ifname", req.IfName, "ip", ip, "ipv6", ipv6, "eni", eniID,
		"pod", req.Pod.Namespace+"/"+req.Pod.Name, "securityGroups", set.groups)
	return out, nil
}

// Release puts the attachment's IP into cooldown and tears its datapath down. Releasing an unknown attachment
// succeeds with Released false.
func (p *ipam) Release(ctx context.Context, req api.ReleaseRequest) (*api.ReleaseResponse, error) {
	if err := validAttachment(req.Attachment); err != nil {
		return nil, err
	}
	// Behind the ADDs of the attachment in flight, which this DEL supersedes: its PodDown comes after their
	// PodUp, whatever they were doing.
	t, _, err := p.turns.take(ctx, req.Attachment, false)
	if err != nil {
		return nil, fmt.Errorf("releasing the IP of %s: %w", req.ContainerID, err)
	}
	defer p.turns.finish(req.Attachment, t)
	return p.release(ctx, req.Attachment, !req.Unused)
}

// supersededErr is errSuperseded, naming ip, when a DEL superseded the ADD of turn t; nil otherwise.
func supersededErr(t *turn, ip string) error {
	if !t.superseded.Load() {
		return nil
	}
	return fmt.Errorf("setting up datapath for %s: %w", ip, errSuperseded)
}

// release removes the attachment's assignment and tears its datapath down; with cooldown the IP waits out the
// cooldown before it is handed out again, without it the IP is free at once.
func (p *ipam) release(ctx context.Context, att api.Attachment, cooldown bool) (*api.ReleaseResponse, error) {
	p.books.mu.Lock()
	a := p.books.st.Assignment(att.ContainerID, att.IfName)
	if a == nil {
		p.books.mu.Unlock()
		p.metrics.releases.WithLabelValues("unknown").Inc()
		return &api.ReleaseResponse{}, nil
	}
	rel := *a
	out := p.toAPI(rel)
	seq, err := p.books.appendLocked(func(st *journal.State) error {
		st.Assignments = slices.DeleteFunc(st.Assignments, func(x journal.Assignment) bool {
			return x.ContainerID == rel.ContainerID && x.IfName == rel.IfName
		})
		if cooldown {
			until := p.clock.Now().Add(p.cooldown)
			st.Cooldowns = append(st.Cooldowns, journal.Cooldown{IP: rel.IP, ENI: rel.ENI, Until: until})
			if rel.IPv6 != "" {
				st.Cooldowns = append(st.Cooldowns, journal.Cooldown{IP: rel.IPv6, ENI: out.IPv6ENI, Until: until})
			}
			if rel.EgressIP != "" {
				// Node-local, on no ENI: pickEgressIP skips it until the cooldown ends (egress.go).
				st.Cooldowns = append(st.Cooldowns, journal.Cooldown{IP: rel.EgressIP, Until: until})
			}
		}
		return nil
	})
	p.books.mu.Unlock()
	if err == nil {
		err = p.books.commit(seq, journal.Pod)
	}
	if err != nil {
		p.metrics.releases.WithLabelValues("error").Inc()
		return nil, fmt.Errorf("journaling release of %s: %w", rel.IP, err)
	}
	if !cooldown {
		p.line.pokeFirst() // the IP is free at once: the ADD waiting first may take it
		p.sets.Poke()
	}
	if p.podGroups != nil && rel.PodName != "" {
		p.podGroups.Stopped(rel.PodNamespace, rel.PodName, rel.PodUID)
	}
	if err := p.podDown(ctx, *out); err != nil {
		p.log.Warn("tearing down pod datapath", "ip", rel.IP, "error", err)
	}
	p.metrics.releases.WithLabelValues("ok").Inc()
	wait := p.cooldown
	if !cooldown {
		wait = 0
	}
	p.log.Info("IP released", "container", rel.ContainerID, "ifname", rel.IfName, "ip", rel.IP, "ipv6", rel.IPv6, "cooldown", wait)
	resp := &api.ReleaseResponse{Released: true, Assignment: out}
	if p.removesVeth {
		// The plugin's DEL skips its own (slow) deletion of the veth. A Release that found no record leaves the
		// answer as it is, so the plugin deletes what its prevResult names.
		resp.HostVethRemoval = api.HostVethRemovalAgent
	}
	return resp, nil
}

// Check returns the attachment's assignment, or ErrNotFound.
func (p *ipam) Check(_ context.Context, req api.CheckRequest) (*api.Assignment, error) {
	if err := validAttachment(req.Attachment); err != nil {
		return nil, err
	}
	p.books.mu.Lock()
	defer p.books.mu.Unlock()
	a := p.books.st.Assignment(req.ContainerID, req.IfName)
	if a == nil {
		return nil, ErrNotFound
	}
	return p.toAPI(*a), nil
}

// Assignments lists every assignment.
func (p *ipam) Assignments() []api.Assignment {
	p.books.mu.Lock()
	defer p.books.mu.Unlock()
	out := make([]api.Assignment, 0, len(p.books.st.Assignments))
	for _, a := range p.books.st.Assignments {
		out = append(out, *p.toAPI(a))
	}
	return out
}

// GC releases every assignment of the request's network whose attachment is not in its valid list; the
// assignments of other networks are not touched.
func (p *ipam) GC(ctx context.Context, req api.GCRequest) (*api.GCResponse, error) {
	keep := map[api.Attachment]bool{}
	for _, v := range req.Valid {
		keep[v] = true
	}
	out := &api.GCResponse{Released: []api.Assignment{}}
	var errs []error
	for _, a := range p.Assignments() {
		if a.Network != req.Network || keep[a.Attachment] {
			continue
		}
		r, err := p.Release(ctx, api.ReleaseRequest{Attachment: a.Attachment})
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

// toAPI needs p.books.mu held (it reads the ENI record).
func (p *ipam) toAPI(a journal.Assignment) *api.Assignment {
	out := &api.Assignment{
		Attachment: api.Attachment{ContainerID: a.ContainerID, IfName: a.IfName}, Network: a.Network, Netns: a.Netns,
		Pod:      api.PodIdentity{Namespace: a.PodNamespace, Name: a.PodName, UID: a.PodUID},
		HostVeth: a.HostVeth, HostIfindex: a.HostIfindex, IP: a.IP, EgressIP: a.EgressIP, IPv6: a.IPv6, ENI: a.ENI, AssignedAt: a.AssignedAt,
		MTU: p.podMTU,
	}
	if e := ipv6PrefixENI(p.books.st, a.IPv6); e != nil {
		out.IPv6ENI, out.IPv6ENIMAC = e.ID, e.MAC
	}
	if e := p.books.st.ENIByID(a.ENI); e != nil {
		out.ENIMAC, out.DeviceIndex, out.SubnetCIDR = e.MAC, e.DeviceIndex, e.SubnetCIDR
		out.Gateway = subnet.Gateway(e.SubnetCIDR)
		out.SecurityGroupSet = e.GroupSet
		out.StrictSecurityGroups = e.GroupSet != "" && p.strictSets
	}
	return out
}

// podOf is an assignment as the datapath sees it, its address parsed. The ENI is left with its id alone when
// the books no longer know it (the assignment names no MAC).
func podOf(a api.Assignment) (dptypes.Pod, error) {
	ip, err := netip.ParseAddr(a.IP)
	if err != nil {
		return dptypes.Pod{}, fmt.Errorf("reading the address of pod %s: %w", a.ContainerID, err)
	}
	var egress netip.Addr
	if a.EgressIP != "" {
		if egress, err = netip.ParseAddr(a.EgressIP); err != nil || !egress.Is4() {
			return dptypes.Pod{}, fmt.Errorf("reading the IPv4 egress address %q of pod %s: not IPv4", a.EgressIP, a.ContainerID)
		}
	}
	eni := dptypes.ENI{ID: a.ENI}
	if a.ENIMAC != "" {
		if eni, err = datapathENI(a.ENI, a.ENIMAC, a.DeviceIndex, false, a.SubnetCIDR); err != nil {
			return dptypes.Pod{}, err
		}
	}
	pod := dptypes.Pod{ContainerID: a.ContainerID, IfName: a.IfName, Netns: a.Netns, IP: ip, EgressIP: egress, HostVeth: a.HostVeth,
		HostIfindex: a.HostIfindex, ENI: eni, VPCOnly: a.StrictSecurityGroups}
	if a.IPv6 != "" {
		if pod.IPv6, err = netip.ParseAddr(a.IPv6); err != nil || !pod.IPv6.Is6() {
			return dptypes.Pod{}, fmt.Errorf("reading the IPv6 address %q of pod %s: not IPv6", a.IPv6, a.ContainerID)
		}
		pod.IPv6ENI = dptypes.ENI{ID: a.IPv6ENI}
		if a.IPv6ENIMAC != "" {
			if pod.IPv6ENI.MAC, err = net.ParseMAC(a.IPv6ENIMAC); err != nil {
				return dptypes.Pod{}, fmt.Errorf("reading the MAC of ENI %s: %w", a.IPv6ENI, err)
			}
		}
	}
	return pod, nil
}

func (p *ipam) podUp(ctx context.Context, a api.Assignment) error {
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	return p.dp.PodUp(ctx, pod)
}

func (p *ipam) podDown(ctx context.Context, a api.Assignment) error {
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	return p.dp.PodDown(ctx, pod)
}

// podUpAgain sets the datapath of att's pod up again (podRepair), in the attachment's turn: a DEL that
// comes meanwhile wins. A pod no longer assigned, or released meanwhile, needs nothing: ip "" and nil.
func (p *ipam) podUpAgain(ctx context.Context, att api.Attachment) (ip string, err error) {
	t, ctx, err := p.turns.take(ctx, att, true)
	if errors.Is(err, errSuperseded) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer p.turns.finish(att, t)
	p.books.mu.Lock()
	var out *api.Assignment
	if a := p.books.st.Assignment(att.ContainerID, att.IfName); a != nil {
		out = p.toAPI(*a)
	}
	p.books.mu.Unlock()
	if out == nil {
		return "", nil
	}
	if err := p.podUp(ctx, *out); err != nil && !t.superseded.Load() {
		return out.IP, err
	}
	return out.IP, nil
}
