package controller_test

import (
	"testing"

	"github.com/eniwire/eniwire/controller"
)

// What the agent writes into a datapath whose maps an upgrade replaced: every assignment's pod, on its ENI,
// and the usable ENIs.
func TestDatapathStateIsTheBooksPodsAndUsableENIs(t *testing.T) {
	w := newWorld(t, "m5.large", 500)
	node := w.startWith(fastConfig(w.dir), controller.Deps{}).node
	waitReady(t, node)
	a := assignRetrying(t, node, "pod-0")
	enis, pods := node.DatapathState()
	if len(pods) != 1 || pods[0].IP.String() != a.IP || pods[0].ENI.ID != a.ENI || pods[0].ENI.MAC.String() != a.ENIMAC || pods[0].ENI.Gateway.String() != a.Gateway {
		t.Errorf("pods = %+v, want the one assigned (%s on %s)", pods, a.IP, a.ENI)
	}
	found := false
	for _, e := range enis {
		found = found || (e.ID == a.ENI && e.MAC.String() == a.ENIMAC)
	}
	if !found {
		t.Errorf("ENIs = %+v, want the pod's ENI %s among them", enis, a.ENI)
	}
}
