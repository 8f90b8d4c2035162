package controller

import (
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/subnet"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// DatapathState is what the books say the datapath holds: the usable ENIs and every assignment's pod. The agent
// hands it to a datapath whose maps an upgrade may have replaced, so the entries are back before the new
// programs take over (nodenet.BPF.Attach); Run then brings each ENI and pod up as after any restart.
func (n *Node) DatapathState() ([]dptypes.ENI, []dptypes.Pod) {
	var enis []dptypes.ENI
	n.books.View(func(st *journal.State) {
		for _, e := range usableENIs(st) {
			enis = append(enis, e)
		}
	})
	var pods []dptypes.Pod
	for _, a := range n.ipam.Assignments() {
		pods = append(pods, podOf(a))
	}
	return enis, pods
}

// usableENIs are the books' ENIs the datapath should have up, by id.
func usableENIs(st *journal.State) map[string]dptypes.ENI {
	usable := map[string]dptypes.ENI{}
	for _, e := range st.ENIs {
		if e.Usable() && e.ID != "" {
			usable[e.ID] = dptypes.ENI{ID: e.ID, MAC: e.MAC, DeviceIndex: e.DeviceIndex, Primary: e.Primary,
				SubnetCIDR: e.SubnetCIDR, Gateway: subnet.Gateway(e.SubnetCIDR)}
		}
	}
	return usable
}
