package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// The prefix scenarios. rollout-prefix starts every node in prefix mode (ENABLE_PREFIX_DELEGATION, the
// strategy's default warm target) with PodsPerNode pods waiting from the first moment, as a deployment scaled
// onto new nodes would, and measures until every pod has an IP. fragmented does the same in subnets that single
// IPs have fragmented (fragment.go), with as many pods per node as its ENIs can address with single IPs.

// describeENIs is the action whose calls the prefix scenarios count until every pod is addressed.
const describeENIs = "DescribeNetworkInterfaces"

// ipsPerPrefix is the addresses of one /28.
const ipsPerPrefix = 16

// podsFor is how many pods a node of the scenario carries.
func (f *fleet) podsFor(inst ec2sim.Instance) int {
	it, _ := ec2sim.LookupInstanceType(inst.Type)
	if f.scenario == Fragmented {
		return singleIPCapacity(it)
	}
	if f.scenario == Exhausted {
		return secondaryCapacity(it)
	}
	return min(f.opts.PodsPerNode, kubeletMaxPods(it))
}

// singleIPCapacity is what a node's ENIs address with single secondary IPs: every slot but the ENIs' primaries.
func singleIPCapacity(it ec2sim.InstanceType) int { return it.MaxENIs * (it.IPv4PerENI - 1) }

// kubeletMaxPods is kubelet's max pods in prefix mode on a Nitro type: ENIs x slots x 16 + 2, capped at 110 up
// to 30 vCPUs and 250 above (the AWS VPC CNI's max-pods-calculator.sh).
func kubeletMaxPods(it ec2sim.InstanceType) int {
	ceiling := 110
	if it.VCPUs > 30 {
		ceiling = 250
	}
	return min(it.MaxENIs*(it.IPv4PerENI-1)*ipsPerPrefix+2, ceiling)
}

// podRollout runs rollout-prefix and fragmented.
func (f *fleet) podRollout(ctx context.Context) (Result, error) {
	res := Result{Strategy: string(f.strategy), Scenario: string(f.scenario), Nodes: f.opts.Nodes}
	if f.strategy == Eniwire {
		res.MinimumIPTarget = f.set.minimumIP
	}
	f.t0 = f.w.clk.Now()
	insts, err := f.addInstances()
	if err != nil {
		return res, err
	}
	if f.scenario == Fragmented {
		if err := f.fragment(ctx, insts); err != nil {
			return res, err
		}
	}
	grain := ipsPerPrefix
	if f.scenario == Fragmented || f.scenario == Exhausted {
		grain = 1 // what can be done: prefixes are not to be had, or not asked for
	}
	var serial float64
	res.LowerBoundSeconds, res.LowerBoundAction, res.CallsNeeded, serial = podLowerBound(f.strategy, insts, f.podsFor, grain)
	// rollout-prefix ends when every pod has its IP, or at a deadline that leaves room for a pool that grows one
	// slot per call. fragmented always runs its whole window (FragmentedWindow, or 3 x the bound when longer), so
	// that the strategies' refused calls are counted over the same time.
	until := time.Duration(max(3*res.LowerBoundSeconds, res.LowerBoundSeconds+300, 1.5*serial) * float64(time.Second))
	if f.scenario == Fragmented {
		until = max(f.opts.FragmentedWindow, time.Duration(3*res.LowerBoundSeconds*float64(time.Second)))
	}
	if f.scenario == Exhausted {
		// The bound counts no refused create; the creates refused when the subnets ran out draw on the same
		// buckets, so the scenario gets the time of a few reconciles beyond it.
		until = max(until, exhaustedWindow)
	}
	if f.opts.MaxVirtual > 0 {
		until = f.opts.MaxVirtual
	}
	f.base = f.w.sim.Counters()
	f.w.describes.reset()
	f.t0 = f.w.clk.Now()
	exhausted := func() (float64, error) { return -1, nil }
	if f.scenario == Exhausted {
		exhausted = f.exhaustDuring(ctx, res.CallsNeeded["CreateNetworkInterface"])
	}
	for _, inst := range insts {
		s := &slot{inst: inst, m: f.newMember(inst), live: true, settledAt: -1}
		if err := s.m.start(ctx); err != nil {
			return res, err
		}
		f.slots = append(f.slots, s)
	}
	d := newPodFill(f, f.slots, func(s *slot) int { return f.podsFor(s.inst) })
	total := d.left()
	res.PodsWanted = total
	f.startTrace(ctx)
	last := time.Now()
	for ctx.Err() == nil && (d.left() > 0 || f.scenario == Fragmented) && f.now() < until {
		d.tick(ctx)
		if d.left() == 0 && res.DescribesToAddressed == 0 {
			res.DescribesToAddressed = minus(f.w.sim.Counters()[describeENIs], f.base[describeENIs]).Calls
			res.DescribesByCauseToAddressed = f.w.describes.snapshot()
		}
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			f.progress("%d/%d pods started", d.started, total)
		}
		sleepCtx(ctx, f.w.clk, podTick)
	}
	d.wait()
	var err2 error
	if res.ExhaustedAtSeconds, err2 = exhausted(); err2 != nil {
		return res, err2
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("running %s: %w", f.scenario, ctx.Err())
	}
	for _, w := range d.waiting {
		if w == 0 {
			res.ConvergedNodes++
		}
	}
	res.Converged = d.left() == 0
	res.ConvergeSeconds = -1
	if res.Converged {
		res.ConvergeSeconds = d.last.Seconds()
	}
	res.VirtualSeconds = f.now().Seconds()
	if f.scenario == Exhausted {
		res.ENIsInPodSubnets = f.enisInPodSubnets()
	}
	f.filled = d
	return res, nil
}

// PodLowerBoundMethod is how the prefix scenarios' lower_bound_seconds is computed; the report prints it.
const PodLowerBoundMethod = `rollout-prefix and fragmented, lower_bound_seconds: the fewest calls that address every node's ` +
	`pods: the pods in slots (a /28 per slot in rollout-prefix, a single IP per slot in fragmented, where the subnet has no ` +
	`/28 to give), the primary ENI's free slots filled by 1 AssignPrivateIpAddresses, each further ENI created with its slots ` +
	`in the CreateNetworkInterface (then 1 AttachNetworkInterface, 1 ModifyNetworkInterfaceAttribute), plus for eniwire ` +
	`2 DescribeNetworkInterfaces per node and for vpc-cni 1 per node and 1 DescribeInstances per new ENI; then the same ` +
	`bucket arithmetic. converge_seconds is when the last pod got its IP.`

// podLowerBound is the bound of a pod rollout: every node's pods in slots of grain addresses, the primary ENI's
// free slots in one assign, each further ENI in one create. serial is the bound for a pool that asks for one slot
// per call (each slot its own AssignPrivateIpAddresses), which sets the run's deadline.
func podLowerBound(strategy Strategy, insts []ec2sim.Instance, pods func(ec2sim.Instance) int, grain int) (float64, string, map[string]int, float64) {
	need := map[string]int{}
	serialAssigns := 0
	for _, inst := range insts {
		it, _ := ec2sim.LookupInstanceType(inst.Type)
		per := it.IPv4PerENI - 1
		slots := (pods(inst) + grain - 1) / grain
		if slots > 0 {
			need["AssignPrivateIpAddresses"]++
		}
		serialAssigns += min(slots, per)
		if rest := slots - per; rest > 0 {
			enis := (rest + per - 1) / per
			need["CreateNetworkInterface"] += enis
			need["AttachNetworkInterface"] += enis
			need["ModifyNetworkInterfaceAttribute"] += enis
			if strategy == VPCCNI {
				need["DescribeInstances"] += enis
			}
		}
		if strategy == VPCCNI {
			need["DescribeNetworkInterfaces"]++
		} else {
			need["DescribeNetworkInterfaces"] += 2
		}
	}
	t, action := bucketBound(need)
	serial := map[string]int{"AssignPrivateIpAddresses": serialAssigns}
	ts, _ := bucketBound(serial)
	return t, action, need, max(t, ts)
}
