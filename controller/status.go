package controller

import (
	"cmp"
	"log/slog"
	"slices"
	"sync"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
	"github.com/eniwire/eniwire/controller/sgpool"
)

// Status is the node's view for `eniwirectl status` and the status endpoint.
func (n *Node) Status() *api.Status {
	ready, why := n.Ready()
	poolReason, poolStatus := n.status.because()
	journalHealth, datapathHealth := api.Healthy, api.Healthy
	if err := n.books.Broken(); err != nil {
		journalHealth = err.Error()
	}
	if broken := n.enis.broken(); broken != "" {
		datapathHealth = broken
	}
	out := &api.Status{Ready: ready, Reason: why, Journal: journalHealth, Datapath: datapathHealth, InstanceID: n.info.InstanceID, InstanceType: n.info.InstanceType,
		MaxENIs: n.eni.MaxENIs(), PoolStatus: poolStatus, PoolReason: poolReason, ENIs: []api.ENIStatus{}, Pending: []api.PendingOp{},
		VPCCIDRs: n.vpc.list(), AddsWaiting: n.ipam.line.waiting()}
	if n.policyStatus != nil {
		out.NetworkPolicy = n.policyStatus()
	}
	if r, ok := n.ipam.podGroups.(interface{ Status() string }); ok {
		out.PodSecurityGroups = r.Status()
	}
	n.pool.report(out, n.clock.Now())
	out.Subnets = n.place.Candidates()
	n.books.View(func(st *journal.State) {
		v := pool.NewView(st, n.clock.Now())
		for _, e := range st.ENIs {
			es := api.ENIStatus{ID: e.ID, MAC: e.MAC, DeviceIndex: e.DeviceIndex, State: string(e.State), Primary: e.Primary,
				DeleteOnTermination: e.DeleteOnTermination, SubnetID: e.SubnetID, SubnetCIDR: e.SubnetCIDR, IPs: slices.Clone(e.IPs)}
			if es.IPs == nil {
				es.IPs = []string{}
			}
			for _, slot := range e.IPs {
				var ps api.PrefixStatus
				for _, ip := range journal.Addresses(slot) {
					switch v.State(ip) {
					case pool.IPAssigned:
						ps.Assigned++
					case pool.IPCooldown, pool.IPLeaving:
						ps.Cooldown++
					default:
						// Warm is what a pod can take now: not an IP of a retired ENI or of one whose
						// datapath is down (what pick skips).
						if e.Usable() && n.servable(e.ID, ip) {
							ps.Warm++
						}
					}
				}
				es.Add(ps.IPCounts)
				if journal.IsPrefix(slot) {
					ps.CIDR = slot
					es.Prefixes = append(es.Prefixes, ps)
				}
			}
			if e.Usable() {
				c := n.ipam.ipv6Counts(&e, st)
				if !n.servable(e.ID, "") {
					c.Warm = 0
				}
				es.Add(c)
			}
			es.SecurityGroupSet = e.GroupSet
			out.Assigned += es.Assigned
			out.Cooldown += es.Cooldown
			if e.GroupSet == "" {
				out.Warm += es.Warm // a set's warm IPs serve its pods alone (Status.SecurityGroupSets)
			}
			out.ENIs = append(out.ENIs, es)
			if e.State != journal.Ready && !e.Primary {
				state := string(e.State)
				if e.ReleaseStep != "" {
					state += "/" + string(e.ReleaseStep)
				}
				out.Pending = append(out.Pending, api.PendingOp{OpID: e.OpID, ENI: e.ID, State: state, Since: e.Since, Error: e.LastError})
			}
		}
		out.CustomNetworking = n.place.CustomNetworkingStatus(st, func(id string) int {
			k := 0
			for _, a := range st.Assignments {
				if a.ENI == id {
					k++
				}
			}
			return k
		})
		if n.ipam.dual {
			out.Warm = n.ipam.dualStackWarm(st, out.Warm)
		}
		for _, op := range st.IPOps {
			out.Pending = append(out.Pending, api.PendingOp{OpID: op.OpID, ENI: op.ENI, State: string(op.Kind) + " IPs", Since: op.Since})
		}
		out.SecurityGroupSets = sgpool.Report(st, v, n.ipam.sets, n.clock.Now(), n.servable)
	})
	slices.SortFunc(out.ENIs, func(a, b api.ENIStatus) int { return cmp.Compare(a.DeviceIndex, b.DeviceIndex) })
	return out
}

// statusLine composes the node's status line from what each part reports, in a fixed priority (the first
// part with something to say wins), and logs the line when it changes. Who may touch it: any goroutine.
type statusLine struct {
	log *slog.Logger
	// parts report their reasons (api.Pool*) and lines, most telling first.
	parts []func() (reason, line string)

	mu   sync.Mutex
	last string
}

// compose returns the line of the first part that reports one, or "", logging a new non-empty line.
func (l *statusLine) compose() string {
	_, s := l.because()
	return s
}

// because returns the reason and the line of the first part that reports a line, or "", "", logging a new
// non-empty line.
func (l *statusLine) because() (reason, s string) {
	for _, part := range l.parts {
		if reason, s = part(); s != "" {
			break
		}
	}
	l.mu.Lock()
	changed := l.last != s
	l.last = s
	l.mu.Unlock()
	if changed && s != "" {
		l.log.Warn("pool status", "status", s, "reason", reason)
	}
	return reason, s
}

// statusNote is one part's line, or "", and its reason (api.Pool*). Who may touch it: any goroutine.
type statusNote struct {
	mu     sync.Mutex
	s      string
	reason string
}

// set sets the line, with no reason.
func (n *statusNote) set(s string) { n.setBecause("", s) }

// setBecause sets the line and its reason.
func (n *statusNote) setBecause(reason, s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.s, n.reason = s, reason
}

func (n *statusNote) get() string {
	_, s := n.because()
	return s
}

// because returns the reason and the line.
func (n *statusNote) because() (reason, s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reason, n.s
}
