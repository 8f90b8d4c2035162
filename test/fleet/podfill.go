package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// podFill places a fixed number of pods on every node at the start of a pod rollout and starts them as IPs come,
// as kubelet retries a sandbox whose CNI ADD failed: every podTick each node with pods waiting is asked for IPs
// until it has none free. It counts pods started per virtual minute and checks that no IP is held by two pods.
type podFill struct {
	f       *fleet
	waiting map[*slot]int
	seq     map[*slot]int
	pods    []filledPod
	byIP    map[string]string
	// perMinute[i] are the pods started in the (i+1)-th virtual minute; last is when the last one started.
	perMinute []int
	last      time.Duration
	started   int
	failed    int
	dups      int
}

type filledPod struct {
	name string
	s    *slot
	ip   string
}

func newPodFill(f *fleet, slots []*slot, pods func(*slot) int) *podFill {
	d := &podFill{f: f, waiting: map[*slot]int{}, seq: map[*slot]int{}, byIP: map[string]string{}}
	for _, s := range slots {
		d.waiting[s] = pods(s)
	}
	return d
}

// left is how many pods still wait for an IP.
func (d *podFill) left() int {
	n := 0
	for _, w := range d.waiting {
		n += w
	}
	return n
}

func (d *podFill) tick(ctx context.Context) {
	for s, w := range d.waiting {
		for ; w > 0; w-- {
			name := fmt.Sprintf("%s-pod-%03d", s.inst.ID, d.seq[s])
			ip, err := s.m.assign(ctx, name)
			if errors.Is(err, errNoIP) {
				break
			}
			if err != nil {
				d.failed++ // kubelet retries the sandbox: the pod keeps waiting
				break
			}
			d.seq[s]++
			d.started++
			now := d.f.now()
			d.last = now
			m := int(now / time.Minute)
			for len(d.perMinute) <= m {
				d.perMinute = append(d.perMinute, 0)
			}
			d.perMinute[m]++
			if other, dup := d.byIP[ip]; dup {
				d.dups++
				d.f.progress("duplicate IP %s: %s and %s", ip, other, name)
			}
			d.byIP[ip] = name
			d.pods = append(d.pods, filledPod{name: name, s: s, ip: ip})
		}
		d.waiting[s] = w
	}
}

// offNode counts the started pods whose IP EC2 does not place on their node: neither a secondary IP nor inside a
// /28 prefix of an ENI attached to the pod's instance.
func (d *podFill) offNode() int {
	owner := map[string]string{}
	var prefixes []struct {
		p    netip.Prefix
		inst string
	}
	for _, e := range d.f.w.sim.Snapshot().ENIs {
		if e.Attachment == nil {
			continue
		}
		for _, ip := range e.IPs {
			owner[ip] = e.Attachment.InstanceID
		}
		for _, p := range e.Prefixes {
			if pp, err := netip.ParsePrefix(p); err == nil {
				prefixes = append(prefixes, struct {
					p    netip.Prefix
					inst string
				}{pp, e.Attachment.InstanceID})
			}
		}
	}
	byBlock := map[netip.Prefix]string{}
	for _, p := range prefixes {
		byBlock[p.p] = p.inst
	}
	n := 0
	for _, p := range d.pods {
		inst, ok := owner[p.ip]
		if !ok {
			a, err := netip.ParseAddr(p.ip)
			if err == nil {
				blk, _ := a.Prefix(28)
				inst, ok = byBlock[blk]
			}
		}
		if !ok || inst != p.s.inst.ID {
			n++
		}
	}
	return n
}
