package nodeready

import (
	"strings"
	"testing"

	"github.com/eniwire/eniwire/controller/api"
)

func TestJudgeSaysWhetherNewPodsGetIPs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		st      api.Status
		ready   bool
		reason  string
		message string
	}{
		{"a starting agent is not ready", api.Status{Reason: "waiting for the first answer from EC2"},
			false, ReasonStarting, "waiting for the first answer from EC2"},
		{"a broken journal is not ready", api.Status{Ready: true, Journal: "journal broken: disk full", Datapath: api.Healthy, Warm: 3},
			false, ReasonJournal, "disk full"},
		{"a datapath with no ENI up is not ready", api.Status{Ready: true, Journal: api.Healthy, Datapath: "no ENI up", Warm: 3},
			false, ReasonDatapath, "no ENI up"},
		{"free IPs are ready", api.Status{Ready: true, Journal: api.Healthy, Datapath: api.Healthy, Warm: 3},
			true, ReasonIPsFree, messageIPsFree},
		{"free IPs are ready while the subnet is full, saying so", api.Status{Ready: true, Warm: 2,
			PoolReason: api.PoolSubnetExhausted, PoolStatus: "subnet subnet-1 has no free addresses"},
			true, ReasonIPsFree, "cannot grow (SubnetExhausted): subnet subnet-1 has no free addresses"},
		{"no free IP in a full subnet is not ready", api.Status{Ready: true, Assigned: 9,
			PoolReason: api.PoolSubnetExhausted, PoolStatus: "subnet subnet-1 has no free addresses"},
			false, api.PoolSubnetExhausted, "subnet subnet-1 has no free addresses"},
		{"max pods reached is not ready", api.Status{Ready: true, Assigned: 29, MaxPods: 29,
			PoolReason: api.PoolMaxPods, PoolStatus: "max pods reached (29/29 pods assigned)"},
			false, api.PoolMaxPods, "29/29"},
		{"EC2 refusing with no free IP is not ready", api.Status{Ready: true,
			PoolReason: api.PoolEC2Refusing, PoolStatus: "EC2 refuses CreateNetworkInterface (InvalidGroup.NotFound)"},
			false, api.PoolEC2Refusing, "InvalidGroup.NotFound"},
		{"no free IP while the pool grows is ready", api.Status{Ready: true, Assigned: 4},
			true, ReasonPoolGrowing, messagePoolGrowing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(&tc.st)
			if v.Ready != tc.ready || v.Reason != tc.reason || !strings.Contains(v.Message, tc.message) {
				t.Errorf("Judge = %+v, want ready %v, reason %s, a message with %q", v, tc.ready, tc.reason, tc.message)
			}
		})
	}
}

func TestTheTaintGoesOnlyOnceThePoolHoldsIPs(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   api.Status
		want bool
	}{
		{"starting", api.Status{Warm: 5}, false},
		{"ready with an empty pool", api.Status{Ready: true, Datapath: api.Healthy}, false},
		{"ready with free IPs", api.Status{Ready: true, Datapath: api.Healthy, Warm: 5}, true},
		{"ready and full (an agent restarted on a full node)", api.Status{Ready: true, Datapath: api.Healthy, Assigned: 29}, true},
		{"free IPs but no datapath", api.Status{Ready: true, Datapath: "no ENI up", Warm: 5}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HoldsIPs(&tc.st); got != tc.want {
				t.Errorf("HoldsIPs = %v, want %v", got, tc.want)
			}
		})
	}
}
