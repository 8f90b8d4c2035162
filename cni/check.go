package cni

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// Check compares the pod's namespace with the agent's record: the address (an IPv6 pod's IPv6 and IPv4
// egress addresses), the routes, the neighbour entries naming the host veth's MAC, and the MTU the agent says. The runtime's prevResult must agree with the record too.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	inv, err := p.start("CHECK", args)
	if err != nil {
		return err
	}
	defer inv.done()
	if err := validateCmd(args, true); err != nil {
		return err
	}
	if _, err := parseArgs(args.Args); err != nil {
		return err
	}
	prev := prevResult(inv.conf)
	if prev == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "eniwire: CHECK needs the prevResult of ADD in the configuration", "")
	}
	podNS, err := plumbing.OpenPod(args.Netns)
	if err != nil {
		return plumbingError("opening the pod's network namespace", err)
	}
	defer podNS.Close()
	rec, err := inv.agent.Check(inv.ctx, api.CheckRequest{Attachment: api.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}})
	if err != nil {
		return agentError("reading the agent's record", inv.conf.AgentSocket, err)
	}
	addrs, err := addrsOf(rec)
	if err != nil {
		return err
	}
	if prevAddrs := podAddrsFromResult(prev); !addrs.equal(prevAddrs) {
		return types.NewError(types.ErrInternal, fmt.Sprintf("eniwire: CHECK: prevResult has %v but the agent assigned %v",
			prevAddrs, addrs), "")
	}
	hostMAC, err := hostVethMAC(rec)
	if err != nil {
		return types.NewError(types.ErrInternal, "eniwire: CHECK: "+err.Error(), "")
	}
	if err := podNS.Verify(podConfig(args.IfName, addrs, hostMAC, rec.MTU)); err != nil {
		return plumbingError("CHECK", err)
	}
	inv.log.Debug("pod checked", "ip", rec.IP)
	return nil
}

// hostVethMAC finds the host veth the agent recorded and makes sure it is the same link (same ifindex).
func hostVethMAC(rec *api.Assignment) (net.HardwareAddr, error) {
	l, err := plumbing.HostLink(rec.HostVeth)
	if err != nil {
		return nil, err
	}
	if rec.HostIfindex != 0 && l.Attrs().Index != rec.HostIfindex {
		return nil, fmt.Errorf("host veth %s has ifindex %d, the agent recorded %d", rec.HostVeth, l.Attrs().Index, rec.HostIfindex)
	}
	return l.Attrs().HardwareAddr, nil
}
