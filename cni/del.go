package cni

import (
	"errors"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// Del releases the pod's IP and sees that its veth goes. When the agent answers that it removes the host veth
// (it does so in the background: a veth's deletion waits on an RCU barrier in the kernel, most of what DEL
// would otherwise cost), Del neither deletes it nor enters the pod's namespace: the pod's end dies with the
// host end, or with the namespace the runtime deletes next. If the runtime keeps the namespace and ADDs again
// before the agent got to it, that ADD finds the pair and reuses it, and the agent keeps it.
// Del succeeds when the namespace, the link or the agent's record is already gone; when the agent cannot be
// reached or holds no record it removes what prevResult names itself and still succeeds, since the agent's GC
// and reconciler return the IP later and a failing DEL only makes the runtime retry forever.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	inv, err := p.start("DEL", args)
	if err != nil {
		return err
	}
	defer inv.done()
	if err := validateCmd(args, false); err != nil {
		return err
	}
	if _, err := parseArgs(args.Args); err != nil {
		return err
	}
	log := inv.log.With("netns", args.Netns)

	att := api.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	var released *api.Assignment
	resp, err := inv.agent.Release(inv.ctx, api.ReleaseRequest{Attachment: att})
	switch {
	case err == nil:
		if resp.Released {
			released = resp.Assignment
		}
	case errors.Is(err, api.ErrUnreachable):
		log.Warn("agent unreachable on DEL; cleaning up from prevResult only", "err", err)
	default:
		return agentError("releasing the IP", inv.conf.AgentSocket, err)
	}

	host := hostIfaceFromResult(prevResult(inv.conf))
	if released != nil && resp.HostVethRemoval == api.HostVethRemovalAgent {
		// A prevResult naming another veth than the agent's record is not the agent's to remove.
		if host != nil && host.Name != released.HostVeth {
			if err := removeHostVethOf(host); err != nil {
				return err
			}
		}
		log.Info("pod unwired; the agent removes the host veth", "ip", released.IP, "hostVeth", released.HostVeth)
		return nil
	}

	if _, err := plumbing.RemovePodLink(args.Netns, args.IfName); err != nil {
		return plumbingError("removing the pod's interface", err)
	}
	// With the namespace gone the kernel took the pair with it; these catch a host end left behind.
	if released != nil {
		if _, err := plumbing.RemoveHostVeth(released.HostVeth, released.HostIfindex, nil); err != nil {
			return plumbingError("removing the host veth", err)
		}
	}
	if host != nil {
		if err := removeHostVethOf(host); err != nil {
			return err
		}
	}
	if released != nil {
		log.Info("pod unwired", "ip", released.IP, "hostVeth", released.HostVeth)
	} else {
		log.Info("pod unwired; the agent held no assignment")
	}
	return nil
}

// removeHostVethOf deletes the host veth a prevResult names, if its MAC still matches.
func removeHostVethOf(host *current.Interface) error {
	mac, _ := net.ParseMAC(host.Mac)
	if mac == nil {
		return nil
	}
	if _, err := plumbing.RemoveHostVeth(host.Name, 0, mac); err != nil {
		return plumbingError("removing the host veth", err)
	}
	return nil
}
