package controller_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/test/ec2sim"
)

var mutating = []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute", "AssignPrivateIpAddresses"}

// warmUp runs one node from empty to WARM_ENI_TARGET = every ENI of an m5.4xlarge (the seed issue's setting)
// with the simulator's default throttling and the EC2 client's default buckets, and returns the virtual time
// it took and the simulator's counters.
func warmUp(b *testing.B) (time.Duration, ec2sim.Counters, int) {
	w := newWorld(b, "m5.4xlarge", 100)
	cfg := fastConfig(w.dir)
	it, _ := ec2sim.LookupInstanceType("m5.4xlarge")
	cfg.WarmENITarget = it.MaxENIs
	start := w.clk.Now()
	r := w.start(cfg, nil, nil)
	want := it.MaxENIs * (it.IPv4PerENI - 1)
	var took time.Duration
	eventually(b, 120*time.Second, "warm target reached", func() error {
		st := r.node.Status()
		if st.Warm < want {
			return fmt.Errorf("%d warm IPs of %d", st.Warm, want)
		}
		for _, e := range st.ENIs {
			if e.State != string(journal.Ready) {
				return fmt.Errorf("ENI %s %s", e.ID, e.State)
			}
		}
		took = w.clk.Since(start)
		return nil
	})
	return took, w.sim.Counters(), it.MaxENIs - 1
}

// lowerBound is the least time the token buckets allow for the calls made: for each action, the calls beyond
// the burst need (calls-burst)/rate seconds; the slowest action bounds the whole. Both the client's per-node
// buckets and the simulator's account buckets are considered.
func lowerBound(c ec2sim.Counters) time.Duration {
	var worst float64
	client := ec2client.DefaultBuckets()
	for action, ac := range c {
		calls := float64(ac.Calls - ac.Throttled)
		if b, ok := client[action]; ok {
			worst = max(worst, (calls-float64(b.Burst))/b.RatePerSec)
		}
		sb := ec2sim.DefaultBucket(action)
		worst = max(worst, (calls-sb.Capacity)/sb.RefillPerSec)
	}
	return time.Duration(worst * float64(time.Second))
}

// BenchmarkWarmUp: virtual seconds from an empty node to the warm target, and the bound the buckets allow.
func BenchmarkWarmUp(b *testing.B) {
	var total, bound time.Duration
	for b.Loop() {
		took, c, _ := warmUp(b)
		total += took
		bound = lowerBound(c)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "virtual-seconds")
	b.ReportMetric(bound.Seconds(), "lower-bound-seconds")
}

// BenchmarkCallsPerENI: EC2 calls per new ENI and per IP, by action, during a warm-up without faults.
func BenchmarkCallsPerENI(b *testing.B) {
	var c ec2sim.Counters
	var enis int
	for b.Loop() {
		_, c, enis = warmUp(b)
	}
	ips := 0
	it, _ := ec2sim.LookupInstanceType("m5.4xlarge")
	ips = it.MaxENIs * (it.IPv4PerENI - 1)
	for _, a := range mutating {
		b.ReportMetric(float64(c[a].Calls)/float64(enis), a+"/ENI")
	}
	b.ReportMetric(float64(c["AssignPrivateIpAddresses"].Calls)/float64(ips), "AssignPrivateIpAddresses/IP")
	b.ReportMetric(float64(c["DescribeNetworkInterfaces"].Calls), "DescribeNetworkInterfaces/warm-up")
	b.ReportMetric(float64(c["CreateTags"].Calls), "CreateTags/warm-up")
}
