package cni

import (
	"cmp"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// Add wires a pod: the veth pair, one Assign round trip carrying the host ifindex (the pod's routes and
// neighbour entry go in while it runs), then the MTU and the pod's address, and prints the result. Whatever
// it took is given back when a later step fails. A repeated Add for the same container and interface finds
// the pair and the agent's assignment in place and prints the same result.
func (p *Plugin) Add(args *skel.CmdArgs) (err error) {
	watch := startStopwatch()
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
	watch.lap("open")
	log := inv.log.With("netns", args.Netns, "pod", pod.Namespace+"/"+pod.Name)

	hostName := hostVethName(pod.PodIdentity, args.ContainerID, args.IfName)
	att := api.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	var veth *plumbing.Veth
	defer func() {
		if err == nil || veth == nil || veth.Reused {
			return
		}
		if _, rmErr := podNS.RemoveLink(args.IfName); rmErr != nil {
			log.Warn("removing veth after failed ADD", "hostVeth", hostName, "err", rmErr)
		}
		_, _ = plumbing.RemoveHostVeth(hostName, veth.HostIndex, veth.HostMAC)
	}()
	var asg *api.Assignment
	var routeErr error
	for try := 1; ; try++ {
		// Created at the MTU the agent says unless configured otherwise, so that its usual answer changes nothing.
		veth, err = podNS.SetupVeth(hostName, args.IfName, api.DefaultMTU)
		if err != nil {
			return plumbingError("creating the veth pair", err)
		}
		watch.lap("veth")
		// The agent journals the assignment while the pod's routes go in: they need the host veth's MAC, not
		// the pod's IP. Whatever the routes did, the answer is read, so an assignment is never left behind.
		pending := inv.agent.SendAssign(inv.ctx, api.AssignRequest{
			Attachment: att, Network: inv.conf.Name, Netns: absolute(args.Netns), Pod: pod.PodIdentity,
			HostVeth: hostName, HostIfindex: veth.HostIndex,
		})
		routeErr = podNS.RouteViaHost(veth.PodIndex, veth.HostMAC)
		watch.lap("routes")
		asg, err = pending.Answer()
		watch.lap("agent_wait")
		if err == nil {
			break
		}
		if try == 1 && veth.Reused && vethGoneRefusal(err) {
			// The pair this ADD found was a released sandbox's that the agent was removing, or has removed
			// since: the agent cannot keep it, so a new pair takes its place.
			log.Info("the agent was removing the pair this ADD found; making a new one", "hostVeth", hostName, "err", err)
			if _, rmErr := podNS.RemoveLink(args.IfName); rmErr != nil {
				return plumbingError("removing the pair the agent was removing", rmErr)
			}
			continue
		}
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
	if routeErr != nil {
		return plumbingError("routing the pod through the host veth", routeErr)
	}

	addrs, err := addrsOf(asg)
	if err != nil {
		return err
	}
	// The agent says the MTU (AWS_VPC_ENI_MTU, capped by the primary ENI's), on both ends alike; an agent that
	// predates the field says 0, which meant the kernel's default.
	if err := podNS.SetMTU(veth, cmp.Or(asg.MTU, plumbing.KernelDefaultMTU)); err != nil {
		return plumbingError("setting the veth's MTU", err)
	}
	if err := configure(podNS, veth, addrs); err != nil {
		return plumbingError("configuring the pod's interface", err)
	}
	result := buildResult(args.Netns, veth, addrs)
	if err := printResult(p.Stdout, result, inv.conf.CNIVersion); err != nil {
		return types.NewError(types.ErrIOFailure, "eniwire: printing the result", err.Error())
	}
	watch.lap("address")
	log.Info("pod wired", append([]any{"ip", asg.IP, "ipv6", asg.IPv6, "egressIP", asg.EgressIP, "eni", asg.ENI, "hostVeth", hostName, "hostIfindex", veth.HostIndex,
		"mtu", asg.MTU, "reused", veth.Reused}, watch.attrs()...)...)
	return nil
}
