package fleet

import (
	"sort"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// Result is one strategy's run of one scenario. The JSON keys are the report's.
type Result struct {
	Strategy string `json:"strategy"`
	Scenario string `json:"scenario"`
	Nodes    int    `json:"nodes"`
	// MinimumIPTarget is the eniwire nodes' MINIMUM_IP_TARGET when the run set one.
	MinimumIPTarget int `json:"minimum_ip_target,omitempty"`
	// ConvergeSeconds is virtual time from the start until every node had reached its target (rollout, chaos:
	// all ENIs of its type with DeleteOnTermination; churn: the end of settling after the churn; rollout-prefix
	// and fragmented: the last pod's IP); -1 if never. ConvergedNodes are the nodes that reached it (the prefix
	// scenarios: the nodes all of whose pods started).
	ConvergeSeconds float64 `json:"converge_seconds"`
	Converged       bool    `json:"converged"`
	ConvergedNodes  int     `json:"converged_nodes"`
	// LowerBoundSeconds is the least time AWS's account buckets allow for the calls needed (see LowerBoundMethod).
	LowerBoundSeconds float64          `json:"lower_bound_seconds"`
	LowerBoundAction  string           `json:"lower_bound_action"`
	CallsNeeded       map[string]int   `json:"calls_needed"`
	Ratio             float64          `json:"converge_over_lower_bound"`
	EC2Calls          map[string]int64 `json:"ec2_calls"`
	ThrottledCalls    int64            `json:"throttled_calls"`
	// ThrottledByAction and ErrorsByCode break the refused calls down (the errors include the throttles).
	ThrottledByAction map[string]int64 `json:"throttled_by_action,omitempty"`
	ErrorsByCode      map[string]int64 `json:"errors_by_code,omitempty"`
	AttachLimit       int64            `json:"attachment_limit_exceeded"`
	LeakedENIs        int              `json:"leaked_enis"`
	LeakedAttached    int              `json:"leaked_attached"`
	LeakedAvailable   int              `json:"leaked_available"`
	MissingDoT        int              `json:"attached_without_delete_on_termination"`
	DuplicateIPs      int              `json:"duplicate_ip_assignments"`
	PodsStarted       int              `json:"pods_started,omitempty"`
	// ExhaustedAtSeconds is when the node subnets ran out in the exhausted scenario (-1: they did not);
	// ENIsInPodSubnets are the ENIs attached in the discovered pod subnets at the end.
	ExhaustedAtSeconds float64 `json:"exhausted_at_seconds,omitempty"`
	ENIsInPodSubnets   int     `json:"enis_in_pod_subnets,omitempty"`
	// The prefix scenarios' pods: how many the nodes carry, how many still wait for an IP at the end, how many
	// started in each virtual minute, the EC2 calls per pod started, and the started pods whose IP EC2 does not
	// place on their node.
	PodsWanted       int        `json:"pods_wanted,omitempty"`
	PodsStuck        int        `json:"pods_stuck,omitempty"`
	PodsPerMinute    []int      `json:"pods_started_per_minute,omitempty"`
	EC2CallsPerPod   float64    `json:"ec2_calls_per_pod,omitempty"`
	PodIPsNotOnNode  int        `json:"pod_ips_not_on_node,omitempty"`
	InsufficientCidr int64      `json:"insufficient_cidr_blocks,omitempty"`
	Fragmentation    *fillStats `json:"fragmentation,omitempty"`
	PodsFailed       int        `json:"pods_failed,omitempty"`
	// DescribesToAddressed are the DescribeNetworkInterfaces calls until every pod had its IP (the prefix
	// scenarios; fragmented runs its whole window after, and its periodic reconciles go on describing).
	DescribesToAddressed int64 `json:"describes_to_all_addressed,omitempty"`
	// DescribesByCause are the nodes' DescribeNetworkInterfaces requests by what sent them, SDK retries included
	// (describecauses.go); the prefix scenarios count from the start of their nodes.
	DescribesByCause map[string]DescribeCause `json:"describes_by_cause,omitempty"`
	// DescribesByCauseToAddressed is DescribesByCause when every pod had its IP.
	DescribesByCauseToAddressed map[string]DescribeCause `json:"describes_by_cause_to_all_addressed,omitempty"`
	// AddsNoIP are the prefix scenarios' ADDs answered "no IP" (kubelet: FailedCreatePodSandBox, then a retry).
	AddsNoIP         int     `json:"adds_answered_no_ip"`
	Kills            int     `json:"controller_kills,omitempty"`
	DroppedResponses int64   `json:"dropped_responses,omitempty"`
	VirtualSeconds   float64 `json:"virtual_seconds"`
	WallSeconds      float64 `json:"wall_seconds"`
	Speedup          float64 `json:"speedup"`
	// SpeedupEffective is the virtual seconds that passed per wall second over the run, SpeedupLeast the
	// slowest pace and SlowShare the share of its wall time virtual time ran below Speedup (pacer.go; absent
	// with a fixed pace).
	SpeedupEffective float64 `json:"speedup_effective,omitempty"`
	SpeedupLeast     float64 `json:"speedup_least,omitempty"`
	SlowShare        float64 `json:"slow_share,omitempty"`
}

// TotalEC2Calls is the run's EC2 calls of every action.
func (r Result) TotalEC2Calls() int64 {
	var calls int64
	for _, n := range r.EC2Calls {
		calls += n
	}
	return calls
}

// LowerBoundMethod is how lower_bound_seconds is computed; the report prints it.
const LowerBoundMethod = `lower_bound_seconds: for each EC2 action, calls_needed = the calls the scenario needs without faults ` +
	`(rollout and chaos: per new ENI 1 CreateNetworkInterface + 1 AttachNetworkInterface + 1 ModifyNetworkInterfaceAttribute, ` +
	`plus for eniwire 2 DescribeNetworkInterfaces per node (its first reconcile), and for legacy per ENI 1 CreateTags + ` +
	`1 DescribeInstances + 1 AssignPrivateIpAddresses and 1 DescribeNetworkInterfaces per node (nodeInit); churn: the ` +
	`calls that succeeded in the run). AWS's bucket for the action (capacity C, refill R/s) allows C + R*t calls by t, ` +
	`so t_action = max(0, (calls_needed - C)/R); the bound is the largest t_action (the buckets are separate) plus the ` +
	`simulator's attach delay; for churn it is at least the scripted churn time.`

// rolloutLowerBound is the bound of a rollout of insts under strategy.
func rolloutLowerBound(strategy Strategy, insts []ec2sim.Instance) (float64, string, map[string]int) {
	enis := 0
	for _, inst := range insts {
		it, _ := ec2sim.LookupInstanceType(inst.Type)
		enis += it.MaxENIs - 1
	}
	need := map[string]int{"CreateNetworkInterface": enis, "AttachNetworkInterface": enis, "ModifyNetworkInterfaceAttribute": enis}
	if strategy == Legacy {
		need["CreateTags"] = enis
		need["DescribeInstances"] = enis
		need["AssignPrivateIpAddresses"] = enis
		need["DescribeNetworkInterfaces"] = len(insts)
	} else {
		need["DescribeNetworkInterfaces"] = 2 * len(insts)
	}
	t, action := bucketBound(need)
	return t, action, need
}

// bucketBound is the largest time any action's account bucket needs for its calls, plus the attach delay.
func bucketBound(need map[string]int) (float64, string) {
	var worst float64
	var which string
	actions := make([]string, 0, len(need))
	for a := range need {
		actions = append(actions, a)
	}
	sort.Strings(actions)
	for _, a := range actions {
		b := ec2sim.DefaultBucket(a)
		if t := max(0, (float64(need[a])-b.Capacity)/b.RefillPerSec); t > worst || which == "" {
			worst, which = t, a
		}
	}
	return worst + attachDelay.Seconds(), which
}

// measure fills the counters and the end-of-run checks of res from the simulator and the nodes' books.
func (f *fleet) measure(res *Result) {
	res.Speedup = f.opts.Speedup
	if f.w.pacer != nil {
		pr := f.w.pacer.report()
		res.SpeedupEffective, res.SpeedupLeast, res.SlowShare = pr.Effective, pr.Least, pr.SlowShare
	}
	res.DescribesByCause = f.w.describes.snapshot()
	res.EC2Calls = map[string]int64{}
	succeeded := map[string]int{}
	for action, c := range f.w.sim.Counters() {
		if action == "" {
			continue
		}
		c = minus(c, f.base[action])
		if c.Calls == 0 {
			continue
		}
		res.InsufficientCidr += c.Errors[ec2sim.CodeInsufficientCidrBlocks]
		if c.Throttled > 0 {
			if res.ThrottledByAction == nil {
				res.ThrottledByAction = map[string]int64{}
			}
			res.ThrottledByAction[action] = c.Throttled
		}
		for code, n := range c.Errors {
			if res.ErrorsByCode == nil {
				res.ErrorsByCode = map[string]int64{}
			}
			res.ErrorsByCode[code] += n
		}
		res.EC2Calls[action] = c.Calls
		res.ThrottledCalls += c.Throttled
		res.AttachLimit += c.Errors["AttachmentLimitExceeded"]
		res.DroppedResponses += c.Dropped
		var failed int64
		for _, n := range c.Errors {
			failed += n
		}
		succeeded[action] = int(c.Calls - failed)
	}
	if f.scenario == Churn {
		t, action := bucketBound(succeeded)
		res.LowerBoundAction = action
		res.CallsNeeded = succeeded
		res.LowerBoundSeconds = max(t, f.opts.ChurnDuration.Seconds())
	}
	if res.ConvergeSeconds > 0 && res.LowerBoundSeconds > 0 {
		res.Ratio = res.ConvergeSeconds / res.LowerBoundSeconds
	}
	if d := f.filled; d != nil {
		res.PodsStarted, res.PodsStuck, res.PodsPerMinute = d.started, d.left(), d.perMinute
		res.PodIPsNotOnNode = d.offNode()
		res.AddsNoIP = d.noIP
		calls := res.TotalEC2Calls()
		if d.started > 0 {
			res.EC2CallsPerPod = float64(calls) / float64(d.started)
		}
		f.pods = podStats{started: d.started, dups: d.dups}
	}
	if f.scenario == Fragmented {
		fs := f.fill
		res.Fragmentation = &fs
	}
	f.mu.Lock()
	res.Kills = f.kills
	res.PodsStarted, res.PodsFailed, res.DuplicateIPs = f.pods.started, f.pods.failed, f.pods.dups
	f.mu.Unlock()

	books := map[string]map[string]bool{}
	held := map[string]bool{}
	for _, s := range f.liveSlots() {
		b := s.m.books()
		books[s.inst.ID] = b
		for id := range b {
			held[id] = true
		}
		if s.settledAt >= 0 && f.filled == nil {
			res.ConvergedNodes++
		}
	}
	for _, e := range f.w.sim.Snapshot().ENIs {
		a := e.Attachment
		op := opKey(e.Tags["eniwire.io/op-id"])
		switch {
		case a != nil && a.DeviceIndex == 0:
			continue
		case a != nil:
			if !a.DeleteOnTermination {
				res.MissingDoT++
			}
			if b, live := books[a.InstanceID]; live && !b[e.ID] && !b[op] {
				res.LeakedAttached++
				f.debugLeak(e)
			}
		case !held[e.ID] && !held[op]:
			res.LeakedAvailable++
			f.debugLeak(e)
		}
	}
	res.LeakedENIs = res.LeakedAttached + res.LeakedAvailable
}

// minus is c less what base had counted.
func minus(c, base ec2sim.ActionCounters) ec2sim.ActionCounters {
	out := ec2sim.ActionCounters{Calls: c.Calls - base.Calls, Throttled: c.Throttled - base.Throttled, Dropped: c.Dropped - base.Dropped,
		Errors: map[string]int64{}}
	for code, n := range c.Errors {
		if n -= base.Errors[code]; n != 0 {
			out.Errors[code] = n
		}
	}
	return out
}
