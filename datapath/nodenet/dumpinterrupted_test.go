package nodenet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestENIUpSurvivesADumpInterruptedByChurn brings an ENI up over and over while links come and go on the
// node, as they do while other ENIs are attached and pods' veths are added: a concurrent change interrupts
// the kernel's dump of the links (NLM_F_DUMP_INTR), and the datapath must dump again, not fail the ENI.
func TestENIUpSurvivesADumpInterruptedByChurn(t *testing.T) {
	node, pinRoot := nodeNS(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	primaryMAC, _ := net.ParseMAC("02:00:00:00:30:01")
	eniMAC, _ := net.ParseMAC("02:00:00:00:30:02")
	eni := dptypes.ENI{ID: "eni-2", MAC: eniMAC, DeviceIndex: 1, Subnet: netip.MustParsePrefix("10.0.1.0/24"), Gateway: netip.MustParseAddr("10.0.1.1")}

	// Enough links that a dump of them takes several reads, so a change between two reads interrupts it.
	const quiet = 100 // veth pairs: 200 links
	var b *BPF
	if err := node.Do(func(ns.NetNS) (err error) {
		if _, err := addVeth("eth0", primaryMAC); err != nil {
			return err
		}
		if _, err := addVeth("ens6", eniMAC); err != nil {
			return err
		}
		for i := range quiet {
			if _, err := addVeth(fmt.Sprintf("quiet%d", i), nil); err != nil {
				return err
			}
		}
		b, err = Open(ctx, Config{
			PinRoot: pinRoot, PrimaryMAC: primaryMAC.String(), PrimaryIP: netip.MustParseAddr("10.0.0.10"),
			VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, MaxPods: 29,
			IMDS: primaryIPs{eniMAC.String(): netip.MustParseAddr("10.0.1.5")}, Logger: log,
		})
		if err != nil {
			return fmt.Errorf("Open: %w", err)
		}
		return b.Attach(ctx, nil, nil)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Do(func(ns.NetNS) error {
			_ = b.Close()
			return Uninstall(ctx, pinRoot, log)
		})
	})

	// Churn: one veth added and removed again and again, until the ENI has come up often enough.
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		_ = node.Do(func(ns.NetNS) error {
			churner := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "churn0"}, PeerName: "churn0p"}
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				if err := netlink.LinkAdd(churner); err == nil {
					_ = netlink.LinkDel(churner)
				}
			}
		})
	})
	defer churn.Wait()
	defer close(stop)

	const rounds = 300
	var failed []error
	if err := node.Do(func(ns.NetNS) error {
		for range rounds {
			if err := b.ENIUp(ctx, eni); err != nil {
				failed = append(failed, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	interrupted := 0
	for _, err := range failed {
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			interrupted++
		}
	}
	if len(failed) > 0 {
		t.Fatalf("ENIUp failed %d of %d times while links changed (%d with an interrupted dump), first: %v", len(failed), rounds, interrupted, failed[0])
	}
}
