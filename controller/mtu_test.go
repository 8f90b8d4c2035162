package controller_test

import (
	"context"
	"testing"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
)

// Every answer about an assignment carries the node's pod MTU, which the plugin sets on both veth ends.
func TestAssignmentsCarryThePodMTU(t *testing.T) {
	w := newWorld(t, "m5.large", 500)
	cfg := fastConfig(w.dir)
	cfg.PodMTU = 1500
	node := w.startWith(cfg, controller.Deps{}).node
	waitReady(t, node)
	if a := assignRetrying(t, node, "pod-0"); a.MTU != 1500 {
		t.Errorf("Assign answered MTU %d, want 1500", a.MTU)
	}
	again, err := node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "pod-0", IfName: "eth0"}, HostIfindex: 7})
	if err != nil || again.MTU != 1500 {
		t.Errorf("repeated Assign = MTU %v, %v; want 1500", again, err)
	}
	rec, err := node.Check(context.Background(), api.CheckRequest{Attachment: api.Attachment{ContainerID: "pod-0", IfName: "eth0"}})
	if err != nil || rec.MTU != 1500 {
		t.Errorf("Check = %+v, %v; want MTU 1500", rec, err)
	}
}
