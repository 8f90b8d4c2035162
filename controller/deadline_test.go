package controller_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
)

// TestABlackHoledCallDoesNotStopPodsGettingIPs: EC2 never answers ModifyNetworkInterfaceAttribute (the
// connection stays open, as behind a proxy that black-holes one action), and the HTTP client has no overall
// timeout, as the SDK's default has none. The new ENI is attached and usable all the same: the stuck modify
// must neither stall the pool's round nor keep pods from the ENI's IPs.
func TestABlackHoledCallDoesNotStopPodsGettingIPs(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	w.sim.Faults().SetLatency("ModifyNetworkInterfaceAttribute", 1000*time.Hour)
	node := w.startWith(fastConfig(w.dir), controller.Deps{EC2: w.ec2With(nil, &http.Client{})}).node
	waitReady(t, node)
	perENI := w.nodeInfo().Limits.IPv4PerENI - 1
	for i := range perENI {
		assignRetrying(t, node, fmt.Sprintf("pod-%d", i))
	}
	prim := primaryID(node.Snapshot())
	// Ten virtual minutes at most for the next pods, which only the new ENI can serve.
	deadline := time.Now().Add(time.Duration(float64(10*time.Minute) / w.clk.Factor()))
	for i := perENI; i < perENI+3; i++ {
		cid := fmt.Sprintf("pod-%d", i)
		eventually(t, time.Until(deadline), "an IP of the new ENI for "+cid+" while Modify never answers", func() error {
			a, err := node.Assign(t.Context(), assignReq(cid))
			if err != nil {
				return err
			}
			if a.ENI == prim {
				t.Fatalf("%s got %s of the full primary", cid, a.IP)
			}
			return nil
		})
	}
}

func assignReq(cid string) api.AssignRequest {
	return api.AssignRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}, Netns: testNetnsDir + cid}
}

// TestASlowReleaseDoesNotHoldBackGrowth: the release of a surplus ENI waits for EC2 to finish the detach,
// which here takes ten virtual minutes. Pods that need a new ENI meanwhile must not wait for it.
func TestASlowReleaseDoesNotHoldBackGrowth(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget = 2
	node := w.start(cfg, nil, nil).node
	waitReady(t, node)
	perENI := w.nodeInfo().Limits.IPv4PerENI - 1
	for i := range perENI + 3 {
		assignRetrying(t, node, fmt.Sprintf("pod-%d", i))
	}
	sec := secondary(node.Snapshot())
	if len(sec) != 1 {
		t.Fatalf("%d secondary ENIs, want 1: %+v", len(sec), node.Snapshot().ENIs)
	}
	w.sim.SetDelays(0, 10*time.Minute)
	// The pods of the secondary ENI go, and three of the primary's: its free IPs meet the warm target, so the
	// secondary ENI is surplus and released.
	for _, i := range []int{0, 1, 2, perENI, perENI + 1, perENI + 2} {
		if _, err := node.Release(t.Context(), api0Release(fmt.Sprintf("pod-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the surplus ENI detaching", func() error {
		if e, _ := w.sim.ENI(sec[0].ID); e.Attachment == nil || e.Attachment.Status != "detaching" {
			return fmt.Errorf("attachment %+v", e.Attachment)
		}
		return nil
	})
	// Six new pods: three fit on the primary, the others need a new ENI.
	start := w.clk.Now()
	for i := range 6 {
		assignRetrying(t, node, fmt.Sprintf("later-%d", i))
	}
	if took := w.clk.Since(start); took > time.Minute {
		t.Fatalf("pods waited %s (virtual) for a new ENI while another ENI's detach was slow", took.Round(time.Second))
	}
}
