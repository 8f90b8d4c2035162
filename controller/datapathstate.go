package controller

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// DatapathState is what the books say the datapath holds: the usable ENIs and every assignment's pod. The agent
// hands it to a datapath whose maps an upgrade may have replaced, so the entries are back before the new
// programs take over (nodenet.BPF.Attach); Run then brings each ENI and pod up as after any restart. An ENI or
// pod whose addresses do not parse is left out here: Run reports it when it brings it up.
func (n *Node) DatapathState() ([]dptypes.ENI, []dptypes.Pod) {
	var enis []dptypes.ENI
	n.books.View(func(st *journal.State) {
		usable, _ := usableENIs(st)
		for _, e := range usable {
			enis = append(enis, e)
		}
	})
	var pods []dptypes.Pod
	for _, a := range n.ipam.Assignments() {
		if p, err := podOf(a); err == nil {
			pods = append(pods, p)
		}
	}
	return enis, pods
}

// usableENIs are the books' ENIs the datapath should have up, by id, and the ones among them whose MAC or
// subnet does not parse, with why.
func usableENIs(st *journal.State) (usable map[string]dptypes.ENI, unreadable map[string]error) {
	usable, unreadable = map[string]dptypes.ENI{}, map[string]error{}
	for _, e := range st.ENIs {
		if !e.Usable() || e.ID == "" {
			continue
		}
		de, err := datapathENI(e.ID, e.MAC, e.DeviceIndex, e.Primary, e.SubnetCIDR)
		if err != nil {
			unreadable[e.ID] = err
			continue
		}
		usable[e.ID] = de
	}
	return usable, unreadable
}

// datapathENI is an ENI as the datapath sees it: the books' strings are parsed here, once, and the datapath
// takes the typed values.
func datapathENI(id, mac string, deviceIndex int, primary bool, subnetCIDR string) (dptypes.ENI, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return dptypes.ENI{}, fmt.Errorf("reading the MAC of ENI %s: %w", id, err)
	}
	cidr, err := netip.ParsePrefix(subnetCIDR)
	if err != nil {
		return dptypes.ENI{}, fmt.Errorf("reading the subnet of ENI %s: %w", id, err)
	}
	return dptypes.ENI{ID: id, MAC: hw, DeviceIndex: deviceIndex, Primary: primary, Subnet: cidr, Gateway: subnet.GatewayOf(cidr)}, nil
}
