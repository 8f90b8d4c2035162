package cni

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// Add wires a pod: the veth pair, one Assign round trip carrying the host ifindex, then the pod's address,
// routes and neighbour entry, and prints the result. Whatever it took is given back when a later step fails.
// A repeated Add for the same container and interface finds the pair and the agent's assignment in place and
// prints the same result.
func (p *Plugin) Add(args *skel.CmdArgs) (err error) {
	inv, err := p.start("ADD", args)
	if err != nil {
		return err
	}
	defer inv.done()
	if err := validateCmd(args, true); err != nil {
		return err
	}
	pod, err := parseArgs(args.Args)
	if err != nil {
		return err
	}
	podNS, err := plumbing.OpenPod(args.Netns)
	if err != nil {
		return plumbingError("opening the pod's network namespace", err)
	}
	defer podNS.Close()
	log := inv.log.With("netns", args.Netns, "pod", pod.Namespace+"/"+pod.Name)

	hostName := hostVethName(pod.PodIdentity, args.ContainerID, args.IfName)
	veth, err := podNS.SetupVeth(hostName, args.IfName)
	if err != nil {
		return plumbingError("creating the veth pair", err)
	}
	defer func() {
		if err == nil || veth.Reused {
			return
		}
		if _, rmErr := podNS.RemoveLink(args.IfName); rmErr != nil {
			log.Warn("removing veth after failed ADD", "hostVeth", hostName, "err", rmErr)
		}
		_, _ = plumbing.RemoveHostVeth(hostName, veth.HostIndex, veth.HostMAC)
	}()

	att := api.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	asg, err := inv.agent.Assign(inv.ctx, api.AssignRequest{
		Attachment: att, Network: inv.conf.Name, Netns: args.Netns, Pod: pod.PodIdentity,
		HostVeth: hostName, HostIfindex: veth.HostIndex,
	})
	if err != nil {
		log.Warn("agent refused assignment", "err", err)
		return agentError("assigning an IP", inv.conf.AgentSocket, err)
	}
	defer func() {
		if err == nil {
			return
		}
		// No container of the pod runs before ADD succeeds, so the IP was never used, unless this ADD found
		// the pair of an earlier one in place: then it cools down as after a DEL.
		if _, relErr := inv.agent.Release(inv.ctx, api.ReleaseRequest{Attachment: att, Unused: !veth.Reused}); relErr != nil {
			log.Error("releasing assignment after failed ADD", "ip", asg.IP, "err", relErr)
		}
	}()

	ip := net.ParseIP(asg.IP).To4()
	if ip == nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("eniwire: the agent assigned %q, which is not an IPv4 address", asg.IP), "")
	}
	// The agent says the MTU (AWS_VPC_ENI_MTU, capped by the primary ENI's), on both ends alike.
	if err := podNS.SetMTU(veth, asg.MTU); err != nil {
		return plumbingError("setting the veth's MTU", err)
	}
	cfg := plumbing.PodConfig{IfName: args.IfName, IP: ip, HostMAC: veth.HostMAC, MTU: asg.MTU}
	if err := podNS.Configure(cfg); err != nil {
		return plumbingError("configuring the pod's interface", err)
	}
	result := buildResult(inv.conf.CNIVersion, args.Netns, veth, ip)
	if err := printResult(p.Stdout, result, inv.conf.CNIVersion); err != nil {
		return types.NewError(types.ErrIOFailure, "eniwire: printing the result", err.Error())
	}
	log.Info("pod wired", "ip", asg.IP, "eni", asg.ENI, "hostVeth", hostName, "hostIfindex", veth.HostIndex, "mtu", asg.MTU, "reused", veth.Reused)
	return nil
}
