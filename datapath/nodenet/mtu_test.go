package nodenet

import (
	"log/slog"
	"net"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

func TestPodMTUIsTheSettingCappedByThePrimaryENI(t *testing.T) {
	node, _ := nodeNS(t)
	primaryMAC, _ := net.ParseMAC("02:00:00:00:20:01")
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	for _, c := range []struct {
		name                     string
		primaryMTU, eniMTU, want int
	}{
		{"the default setting on a jumbo primary ENI", 9001, 9001, 9001},
		{"a smaller setting wins", 9001, 1500, 1500},
		{"a smaller primary ENI wins", 1500, 9001, 1500},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got int
			if err := node.Do(func(ns.NetNS) error {
				l, err := netlink.LinkByName("eth0")
				if err != nil {
					if l, err = addVeth("eth0", primaryMAC); err != nil {
						return err
					}
				}
				if err := netlink.LinkSetMTU(l, c.primaryMTU); err != nil {
					return err
				}
				got = PodMTU(primaryMAC.String(), c.eniMTU, log)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("PodMTU with the primary ENI at %d and AWS_VPC_ENI_MTU=%d = %d, want %d", c.primaryMTU, c.eniMTU, got, c.want)
			}
		})
	}
	t.Run("without the primary ENI's interface the setting stands", func(t *testing.T) {
		var got int
		_ = node.Do(func(ns.NetNS) error { got = PodMTU("02:00:00:00:20:99", 1500, log); return nil })
		if got != 1500 {
			t.Errorf("PodMTU without the primary ENI = %d, want the setting 1500", got)
		}
	})
}
