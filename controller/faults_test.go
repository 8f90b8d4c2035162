package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/metadata"
)

func TestFaultsEndWithCleanBooks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(w *world)
	}{
		{"a dropped CreateNetworkInterface answer", func(w *world) { w.sim.Faults().DropResponses("CreateNetworkInterface", 3) }},
		{"a dropped AttachNetworkInterface answer", func(w *world) { w.sim.Faults().DropResponses("AttachNetworkInterface", 3) }},
		{"a dropped ModifyNetworkInterfaceAttribute answer", func(w *world) { w.sim.Faults().DropResponses("ModifyNetworkInterfaceAttribute", 3) }},
		{"a dropped AssignPrivateIpAddresses answer", func(w *world) { w.sim.Faults().DropResponses("AssignPrivateIpAddresses", 3) }},
		{"a dropped UnassignPrivateIpAddresses answer", func(w *world) { w.sim.Faults().DropResponses("UnassignPrivateIpAddresses", 3) }},
		{"a dropped DetachNetworkInterface answer", func(w *world) { w.sim.Faults().DropResponses("DetachNetworkInterface", 3) }},
		{"a dropped DeleteNetworkInterface answer", func(w *world) { w.sim.Faults().DropResponses("DeleteNetworkInterface", 3) }},
		{"new ENIs invisible for 20 virtual seconds", func(w *world) { w.sim.Faults().SetVisibilityDelay(20 * time.Second) }},
		{"IMDS lagging 2 virtual minutes", func(w *world) { w.sim.Faults().SetIMDSLag(2 * time.Minute) }},
		{"slow attachments and detachments", func(w *world) { w.sim.SetDelays(15*time.Second, 15*time.Second) }},
		{"random throttling of every ENI call", func(w *world) {
			for _, a := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute",
				"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface"} {
				w.sim.Faults().SetProbability(a, "RequestLimitExceeded", 0.3)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "m5.large", 500)
			tc.inject(w)
			cfg := churnConfig(w.dir)
			imdsURL, err := w.sw.Server.OpenIMDS(w.inst.ID)
			if err != nil {
				t.Fatal(err)
			}
			md := imds.New(imds.Options{Endpoint: imdsURL, HTTPClient: &http.Client{Timeout: 5 * time.Second}})
			node := w.startWith(cfg, controller.Deps{IMDS: metadata.IMDS{API: md}}).node
			waitReady(t, node)
			answered := map[string]string{}
			for i := range churnPods {
				a := assignRetrying(t, node, fmt.Sprintf("pod-%d", i))
				answered[a.ContainerID] = a.IP
			}
			eventually(t, 60*time.Second, "books agree with EC2 with pods", func() error {
				return w.checkBooks(node.Snapshot(), answered)
			})
			for i := range churnPods {
				if _, err := node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: fmt.Sprintf("pod-%d", i), IfName: "eth0"}}); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 60*time.Second, "surplus ENI gone and books agree", func() error {
				for _, e := range w.sim.Snapshot().ENIs {
					if e.Tags["eniwire.io/instance-id"] == w.inst.ID {
						return fmt.Errorf("ENI %s still exists (%s)", e.ID, e.Status)
					}
				}
				return w.checkBooks(node.Snapshot(), nil)
			})
			if n := w.sim.Counters()["AttachNetworkInterface"].Errors["AttachmentLimitExceeded"]; n != 0 {
				t.Fatalf("simulator sent %d AttachmentLimitExceeded", n)
			}
		})
	}
}

func TestRefusalsBackOffWithAClearStatus(t *testing.T) {
	for _, tc := range []struct {
		name, code, status string
	}{
		{"subnet exhaustion", "InsufficientFreeAddressesInSubnet", "no free addresses"},
		{"a missing IAM permission", "UnauthorizedOperation", "UnauthorizedOperation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "m5.large", 200)
			for _, a := range []string{"AssignPrivateIpAddresses", "CreateNetworkInterface"} {
				w.sim.Faults().SetProbability(a, tc.code, 1)
			}
			r := w.start(fastConfig(w.dir), nil, nil)
			waitReady(t, r.node)
			start := w.clk.Now()
			eventually(t, 30*time.Second, "clear pool status", func() error {
				if s := r.node.Status().PoolStatus; !strings.Contains(s, tc.status) {
					return fmt.Errorf("pool status %q", s)
				}
				return nil
			})
			_, err := r.node.Assign(context.Background(), api.AssignRequest{Attachment: api.Attachment{ContainerID: "c", IfName: "eth0"}})
			if err == nil || !strings.Contains(err.Error(), "no free IP") {
				t.Fatalf("Assign with an empty pool = %v, want ErrNoIP", err)
			}
			// Ten virtual minutes of refusals must not become a storm.
			eventually(t, 30*time.Second, "ten virtual minutes", func() error {
				if w.clk.Since(start) < 10*time.Minute {
					return fmt.Errorf("%s passed", w.clk.Since(start))
				}
				return nil
			})
			c := w.sim.Counters()
			calls := c["AssignPrivateIpAddresses"].Calls + c["CreateNetworkInterface"].Calls
			if calls > 40 {
				t.Fatalf("%d refused calls in ten virtual minutes: a retry storm", calls)
			}
			t.Logf("%d refused calls in %s", calls, w.clk.Since(start).Round(time.Second))
			w.sim.Faults().Reset()
			eventually(t, 30*time.Second, "recovery after the refusal ends", func() error {
				if s := r.node.Status(); s.Warm == 0 {
					return fmt.Errorf("no warm IPs yet (%s)", s.PoolStatus)
				}
				return nil
			})
		})
	}
}

var _ = aws.String
