package controller

import (
	"cmp"
	"log/slog"
	"slices"
	"sync"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/pool"
)

// Status is the node's view for `eniwirectl status` and the status endpoint.
func (n *Node) Status() *api.Status {
	ready, why := n.Ready()
	ps := n.status.get()
	journalHealth, datapathHealth := api.Healthy, api.Healthy
	if err := n.books.Broken(); err != nil {
		journalHealth = err.Error()
	}
	if broken := n.enis.broken(); broken != "" {
		datapathHealth = broken
	}
	out := &api.Status{Ready: ready, Reason: why, Journal: journalHealth, Datapath: datapathHealth, InstanceID: n.info.InstanceID, InstanceType: n.info.InstanceType,
		MaxENIs: n.eni.MaxENIs(), IPsPerENI: n.pool.limits.IPsPerENI, PoolStatus: ps, ENIs: []api.ENIStatus{}, Pending: []api.PendingOp{},
		MaxPods: n.pool.targets.MaxPods, PrefixDelegation: n.pool.targets.Prefixes, PrefixFallback: n.pool.fallback.status(n.clock.Now()),
		VPCCIDRs: n.vpc.list()}
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
						if e.Usable() {
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
			out.Assigned += es.Assigned
			out.Warm += es.Warm
			out.Cooldown += es.Cooldown
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
		for _, op := range st.IPOps {
			out.Pending = append(out.Pending, api.PendingOp{OpID: op.OpID, ENI: op.ENI, State: string(op.Kind) + " IPs", Since: op.Since})
		}
	})
	slices.SortFunc(out.ENIs, func(a, b api.ENIStatus) int { return cmp.Compare(a.DeviceIndex, b.DeviceIndex) })
	return out
}

// poolStatus is the pool's status line: why the pool cannot reach its targets, or "". Who may touch it: any
// goroutine; the pool manager and housekeeping set it, Status reads it, under its own lock.
type poolStatus struct {
	log *slog.Logger

	mu sync.Mutex
	s  string
}

// set replaces the status line, logging a new non-empty one.
func (p *poolStatus) set(s string) {
	p.mu.Lock()
	changed := p.s != s
	p.s = s
	p.mu.Unlock()
	if changed && s != "" {
		p.log.Warn("pool status", "status", s)
	}
}

// setIfEmpty sets s unless a status is set already (a more telling one, such as a backoff's).
func (p *poolStatus) setIfEmpty(s string) {
	p.mu.Lock()
	empty := p.s == ""
	p.mu.Unlock()
	if empty {
		p.set(s)
	}
}

func (p *poolStatus) get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s
}
