package nodenet

import (
	"log/slog"
	"net"

	"github.com/vishvananda/netlink"
)

// PodMTU is the MTU of the pods' veths, which the agent hands the plugin in every assignment: eniMTU (the
// AWS_VPC_ENI_MTU setting, which the secondary ENIs get too), or the primary ENI's MTU when that is smaller.
// The primary ENI keeps the MTU the distribution gave it, and it carries what the host stack forwards for
// the pods (SNAT to the internet, Services routed by the main table): a pod sending larger packets than it
// takes would depend on fragmentation or path MTU discovery for every such flow. When the primary ENI's
// interface cannot be found (a simulation without links), eniMTU stands.
func PodMTU(primaryMAC string, eniMTU int, log *slog.Logger) int {
	hw, err := net.ParseMAC(primaryMAC)
	var l netlink.Link
	if err == nil {
		l, err = linkByMAC(hw)
	}
	if err != nil {
		log.Info("pod MTU from the setting alone: the primary ENI's interface is not found", "mtu", eniMTU, "error", err)
		return eniMTU
	}
	mtu := eniMTU
	if p := l.Attrs().MTU; p > 0 && p < mtu {
		mtu = p
	}
	log.Info("pod MTU", "mtu", mtu, "eni_mtu", eniMTU, "primary", l.Attrs().Name, "primary_mtu", l.Attrs().MTU)
	return mtu
}
