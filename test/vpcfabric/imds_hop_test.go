package vpcfabric

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/vishvananda/netlink"
)

// masqueradeRuleset makes the node translate what its pods send to IMDS to its own address, as the agent's
// SNAT does for destinations outside the VPC.
const masqueradeRuleset = `table ip imdshoptest {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip daddr 169.254.169.254 oifname "eth0" masquerade
	}
}
`

// TestIMDSHopLimitKeepsTokensFromWhatIsBehindTheNode: the token's answer leaves the router with the
// instance's hop limit as its TTL; the node receives it at 1, a pod behind the node (one routed hop
// further, with its own address or masqueraded to the node's) only at 2.
func TestIMDSHopLimitKeepsTokensFromWhatIsBehindTheNode(t *testing.T) {
	w := newWorld(t)
	ctx := waitCtx(t)
	api := w.ec2Client()
	nl, err := netlink.NewHandleAt(mustNS(t, w.node.NetnsPath))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Delete)
	out, err := api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(w.inst.PrimaryENI), SecondaryPrivateIpAddressCount: aws.Int32(1)})
	if err != nil || len(out.AssignedPrivateIpAddresses) != 1 {
		t.Fatalf("assigning the pod's IP: %v %v", out, err)
	}
	podIP := netip.MustParseAddr(aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress))
	if err := w.fab.WaitIP(ctx, podIP); err != nil {
		t.Fatal(err)
	}
	pod := newPodBehind(t, t, w, nl)
	pod.hold(t, nl, podIP)

	setOptions := func(t *testing.T, hops int32, tokens types.HttpTokensState) {
		t.Helper()
		if _, err := api.ModifyInstanceMetadataOptions(ctx, &ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String(w.inst.ID),
			HttpPutResponseHopLimit: aws.Int32(hops), HttpTokens: tokens}); err != nil {
			t.Fatalf("setting the hop limit to %d: %v", hops, err)
		}
	}
	wantToken := func(t *testing.T, who, nsPath string) {
		t.Helper()
		tok, err := IMDSToken(ctx, nsPath)
		if err != nil {
			t.Fatalf("%s got no token: %v", who, err)
		}
		if id, err := IMDSMetadata(ctx, nsPath, tok, "instance-id"); err != nil || id != w.inst.ID {
			t.Fatalf("%s read instance-id %q, %v; want %s", who, id, err, w.inst.ID)
		}
	}
	wantNoToken := func(t *testing.T, who, nsPath string) {
		t.Helper()
		before := timeExceededSent(t, w.node)
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if tok, err := IMDSToken(short, nsPath); err == nil {
			t.Fatalf("%s got token %q, want its answer to expire on the way", who, tok)
		}
		if after := timeExceededSent(t, w.node); after <= before {
			t.Errorf("the node sent no ICMP time exceeded (%d before, %d after): the answer was not dropped for its TTL", before, after)
		}
	}

	for _, mode := range []struct {
		name string
		snat bool
	}{{"the pod's own address", false}, {"masqueraded to the node's address", true}} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.snat {
				if _, err := nft(w.node.NetnsPath, masqueradeRuleset, "-f", "-"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = nft(w.node.NetnsPath, "", "delete", "table", "ip", "imdshoptest") })
			}
			t.Run("hop limit 1: the node gets a token, the pod none", func(t *testing.T) {
				setOptions(t, 1, "")
				wantToken(t, "the node", w.node.NetnsPath)
				wantNoToken(t, "the pod", pod.ns.path())
			})
			t.Run("hop limit 2: the pod gets a token", func(t *testing.T) {
				setOptions(t, 2, "")
				wantToken(t, "the pod", pod.ns.path())
			})
			t.Run("hop limit 1 with tokens optional: the pod reads IMDSv1, which the hop limit does not cover", func(t *testing.T) {
				setOptions(t, 1, types.HttpTokensStateOptional)
				t.Cleanup(func() { setOptions(t, 2, types.HttpTokensStateRequired) })
				if id, err := IMDSMetadata(ctx, pod.ns.path(), "", "instance-id"); err != nil || strings.TrimSpace(id) != w.inst.ID {
					t.Fatalf("IMDSv1 instance-id from the pod = %q, %v; want %s", id, err, w.inst.ID)
				}
			})
		})
	}
}

// timeExceededSent is how many ICMP time exceeded messages the node has sent (Icmp OutTimeExcds).
func timeExceededSent(t *testing.T, node Node) int {
	t.Helper()
	out, err := node.Command(waitCtx(t), "cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatalf("reading the node's /proc/net/snmp: %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Icmp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "OutTimeExcds" && i < len(f) {
				n, err := strconv.Atoi(f[i])
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	t.Fatalf("no Icmp OutTimeExcds in the node's /proc/net/snmp:\n%s", out)
	return 0
}
