package cluster

import (
	"net/netip"
	"reflect"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/netpol/tiers"
)

// Rules is what the ClusterNetworkPolicies that select one pod say of each of its directions.
type Rules struct {
	Ingress, Egress Tiers
}

// Tiers is one direction's rules by tier, each rule's peers and ports resolved; tiers.Direction orders them.
type Tiers struct {
	Admin, Baseline []tiers.Rule
}

// Empty says whether no rule reaches the direction.
func (t Tiers) Empty() bool { return len(t.Admin) == 0 && len(t.Baseline) == 0 }

// Empty says whether no ClusterNetworkPolicy selects the pod (or none has a rule of either direction).
func (r Rules) Empty() bool { return r.Ingress.Empty() && r.Egress.Empty() }

// Direction is the direction's tiers around its NetworkPolicy state: isolated and the entries as
// dptypes.PodPolicy gives them.
func (t Tiers) Direction(isolated bool, networkPolicy []dptypes.PeerPorts) tiers.Direction {
	return tiers.Direction{Admin: t.Admin, Isolated: isolated, NetworkPolicy: networkPolicy, Baseline: t.Baseline}
}

func equalRules(a, b Rules) bool { return reflect.DeepEqual(a, b) }

// everyAddress is the peers of a rule that matches every address: the two families' roots.
var everyAddress = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
