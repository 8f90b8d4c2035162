package cni

import (
	"errors"
	"net"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// Del releases the pod's IP and removes its veth. It succeeds when the namespace, the link or the agent's record
// is already gone; when the agent cannot be reached it removes what prevResult names and still succeeds, since
// the agent's GC and reconciler return the IP later and a failing DEL only makes the runtime retry forever.
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

	if _, err := plumbing.RemovePodLink(args.Netns, args.IfName); err != nil {
		return plumbingError("removing the pod's interface", err)
	}
	// With the namespace gone the kernel took the pair with it; these catch a host end left behind.
	if released != nil {
		if _, err := plumbing.RemoveHostVeth(released.HostVeth, released.HostIfindex, nil); err != nil {
			return plumbingError("removing the host veth", err)
		}
	}
	if host := hostIfaceFromResult(prevResult(inv.conf)); host != nil {
		mac, _ := net.ParseMAC(host.Mac)
		if mac != nil {
			if _, err := plumbing.RemoveHostVeth(host.Name, 0, mac); err != nil {
				return plumbingError("removing the host veth", err)
			}
		}
	}
	if released != nil {
		log.Info("pod unwired", "ip", released.IP, "hostVeth", released.HostVeth)
	} else {
		log.Info("pod unwired; the agent held no assignment")
	}
	return nil
}
