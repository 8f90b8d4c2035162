package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/nodeready"
	"github.com/eniwire/eniwire/test/simworld"
)

// TestADualStackNodeWithoutASlash80IsNotReady: with the shipped IAM policy a primary ENI that lacks the
// cluster tag gets no /80 (AssignIpv6Addresses: UnauthorizedOperation). Every dual-stack ADD needs an IPv6 of
// it, so the node has nothing warm, the Node condition says why, and the startup taint stays, whatever IPv4
// IPs the pool holds (issue 36 item 12: it counted the IPv4 IPs, was untainted and IPAMReady=True while
// every ADD failed).
func TestADualStackNodeWithoutASlash80IsNotReady(t *testing.T) {
	w := newWorldWith(t, simworld.Options{Type: "m5.large", Factor: 50, DualStack: true})
	w.sim.Faults().SetProbability("AssignIpv6Addresses", "UnauthorizedOperation", 1)
	r := w.start(dualStackConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	eventually(t, 20*time.Second, "the verdict on a node without a /80", func() error {
		st := r.node.Status()
		v := nodeready.Judge(st)
		if st.Warm != 0 || v.Ready || nodeready.HoldsIPs(st) {
			return fmt.Errorf("%d warm, verdict %+v, holds IPs %v: want none warm, not ready, the taint kept", st.Warm, v, nodeready.HoldsIPs(st))
		}
		if v.Reason == "" || v.Message == "" {
			return fmt.Errorf("verdict %+v names no cause", v)
		}
		return nil
	})
	v := nodeready.Judge(r.node.Status())
	t.Logf("verdict %s: %s", v.Reason, v.Message)
	if _, err := r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "pod-0", IfName: "eth0"},
		Netns: testNetnsDir + "pod-0"}); err == nil {
		t.Fatal("an ADD got addresses on a node without a /80")
	}

	// Once EC2 allows it, the /80 comes and the node is ready with IPs free.
	w.sim.Faults().Reset()
	eventually(t, 60*time.Second, "the /80 and a ready verdict", func() error {
		st := r.node.Status()
		if v := nodeready.Judge(st); !v.Ready || st.Warm == 0 {
			return fmt.Errorf("%d warm, verdict %+v", st.Warm, v)
		}
		return nil
	})
	assignRetrying(t, r.node, "pod-1")
}
