package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// podFill places a fixed number of pods on every node at the start of a pod rollout and starts them as IPs come,
// as kubelet's pod workers do: on a node whose ADD waits for the pool's refill (eniwire), every pod waiting has its
// ADD in flight, each in its own goroutine, and a failed ADD (kubelet's FailedCreatePodSandBox) is sent again at
// the next podTick; on a node whose ADD answers at once (the AWS VPC CNI's model), every podTick the node is asked
// for IPs until it has none free. It counts pods started per virtual minute and the failed ADDs, and checks that
// no IP is held by two pods.
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
	// noIP are the ADDs answered "no IP" (each a FailedCreatePodSandBox for kubelet).
	noIP int

	// inFlight are the ADDs in flight per node; answers collects their answers until the next tick.
	inFlight map[*slot]int
	mu       sync.Mutex
	answers  []fillAnswer
	group    sync.WaitGroup
}

type filledPod struct {
	name string
	s    *slot
	ip   string
}

// fillAnswer is the answer to one ADD in flight, and when it came.
type fillAnswer struct {
	s    *slot
	name string
	ip   string
	err  error
	at   time.Duration
}

func newPodFill(f *fleet, slots []*slot, pods func(*slot) int) *podFill {
	d := &podFill{f: f, waiting: map[*slot]int{}, seq: map[*slot]int{}, byIP: map[string]string{}, inFlight: map[*slot]int{}}
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
	d.collect()
	for s, w := range d.waiting {
		if s.m.addWaits() {
			for ; d.inFlight[s] < w; d.inFlight[s]++ {
				d.launch(ctx, s, d.nextName(s))
			}
			continue
		}
		for ; w > 0; w-- {
			name := d.nextName(s)
			ip, err := s.m.assign(ctx, name)
			if !d.answered(fillAnswer{s: s, name: name, ip: ip, err: err, at: d.f.now()}) {
				break
			}
		}
	}
}

// nextName is the container id of the next ADD on s: a sandbox kubelet creates again has a new one.
func (d *podFill) nextName(s *slot) string {
	name := fmt.Sprintf("%s-pod-%03d", s.inst.ID, d.seq[s])
	d.seq[s]++
	return name
}

// launch sends an ADD for name on s in its own goroutine; its answer waits in answers for the next tick.
func (d *podFill) launch(ctx context.Context, s *slot, name string) {
	d.group.Go(func() {
		ip, err := s.m.assign(ctx, name)
		d.mu.Lock()
		d.answers = append(d.answers, fillAnswer{s: s, name: name, ip: ip, err: err, at: d.f.now()})
		d.mu.Unlock()
	})
}

// collect takes in the answers of the ADDs in flight.
func (d *podFill) collect() {
	d.mu.Lock()
	answers := d.answers
	d.answers = nil
	d.mu.Unlock()
	for _, a := range answers {
		d.inFlight[a.s]--
		d.answered(a)
	}
}

// wait lets the ADDs in flight end (their node stopped or their context ended) and takes in their answers.
func (d *podFill) wait() {
	d.group.Wait()
	d.collect()
}

// answered counts a's answer and reports whether the pod started.
func (d *podFill) answered(a fillAnswer) bool {
	if errors.Is(a.err, errNotReady) {
		return false // its pods are not scheduled yet
	}
	if errors.Is(a.err, errNoIP) {
		d.noIP++
		return false
	}
	if a.err != nil {
		d.failed++ // kubelet retries the sandbox: the pod keeps waiting
		return false
	}
	d.waiting[a.s]--
	d.started++
	d.last = a.at
	m := int(a.at / time.Minute)
	for len(d.perMinute) <= m {
		d.perMinute = append(d.perMinute, 0)
	}
	d.perMinute[m]++
	if other, dup := d.byIP[a.ip]; dup {
		d.dups++
		d.f.progress("duplicate IP %s: %s and %s", a.ip, other, a.name)
	}
	d.byIP[a.ip] = a.name
	d.pods = append(d.pods, filledPod{name: a.name, s: a.s, ip: a.ip})
	return true
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
