package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/api"
)

// The status names why the pool cannot grow in a word a Kubernetes condition can carry (api.Pool*), beside
// its line, so the node's eniwire.io/IPAMReady condition says why without parsing the line.
func TestPoolStatusNamesItsReason(t *testing.T) {
	for _, tc := range []struct {
		name, code, reason string
	}{
		{"a full subnet", "InsufficientFreeAddressesInSubnet", api.PoolSubnetExhausted},
		{"a missing IAM permission", "UnauthorizedOperation", api.PoolUnauthorized},
		{"EC2 refusing the calls", "InvalidParameterValue", api.PoolEC2Refusing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "m5.large", 200)
			for _, a := range []string{"AssignPrivateIpAddresses", "CreateNetworkInterface"} {
				w.sim.Faults().SetProbability(a, tc.code, 1)
			}
			r := w.start(fastConfig(w.dir), nil, nil)
			waitReady(t, r.node)
			eventually(t, 30*time.Second, "the reason", func() error {
				if s := r.node.Status(); s.PoolReason != tc.reason || s.PoolStatus == "" {
					return fmt.Errorf("reason %q, line %q", s.PoolReason, s.PoolStatus)
				}
				return nil
			})
			w.sim.Faults().Reset()
			eventually(t, 30*time.Second, "no reason once the pool grew", func() error {
				if s := r.node.Status(); s.Warm == 0 || s.PoolReason != "" {
					return fmt.Errorf("%d warm, reason %q, line %q", s.Warm, s.PoolReason, s.PoolStatus)
				}
				return nil
			})
		})
	}
	t.Run("max pods", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, "m5.large", 200)
		cfg := fastConfig(w.dir)
		cfg.MaxPods = 3
		r := w.start(cfg, nil, nil)
		waitReady(t, r.node)
		for i := range cfg.MaxPods {
			assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
		}
		eventually(t, 30*time.Second, "the reason", func() error {
			if s := r.node.Status(); s.PoolReason != api.PoolMaxPods {
				return fmt.Errorf("reason %q, line %q", s.PoolReason, s.PoolStatus)
			}
			return nil
		})
		if _, err := r.node.Release(context.Background(), api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "pod-0", IfName: "eth0"}}); err != nil {
			t.Fatal(err)
		}
	})
}
