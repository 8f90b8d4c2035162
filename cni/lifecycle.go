package cni

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// Status tells the runtime whether ADD can succeed now: it fails with ErrPluginNotAvailable while the agent
// cannot be reached, is still starting, or has no warm IP to hand out.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	inv, err := p.start("STATUS", args)
	if err != nil {
		return err
	}
	defer inv.done()
	st, err := inv.agent.Status(inv.ctx)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable,
			fmt.Sprintf("eniwire: the eniwire agent is not reachable at %s", inv.conf.AgentSocket), err.Error())
	}
	if !st.Ready {
		return types.NewError(types.ErrPluginNotAvailable, "eniwire: the eniwire agent is not ready: "+st.Reason, "")
	}
	if st.Warm == 0 {
		return types.NewError(types.ErrPluginNotAvailable, "eniwire: the node has no free IP address for a new pod",
			st.PoolStatus)
	}
	return nil
}

// GC releases every assignment of this network (the conflist's name) whose attachment the runtime no longer
// lists, and removes the host veths those assignments recorded if they are still there. Other networks'
// assignments are not touched.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	inv, err := p.start("GC", args)
	if err != nil {
		return err
	}
	defer inv.done()
	valid := make([]api.Attachment, 0, len(inv.conf.ValidAttachments))
	for _, a := range inv.conf.ValidAttachments {
		valid = append(valid, api.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	resp, err := inv.agent.GC(inv.ctx, api.GCRequest{Network: inv.conf.Name, Valid: valid})
	if err != nil {
		return agentError("collecting stale assignments", inv.conf.AgentSocket, err)
	}
	for _, a := range resp.Released {
		if _, err := plumbing.RemoveHostVeth(a.HostVeth, a.HostIfindex, nil); err != nil {
			inv.log.Warn("removing host veth of a collected assignment", "hostVeth", a.HostVeth, "err", err)
		}
		inv.log.Info("stale assignment released", "containerID", a.ContainerID, "ifName", a.IfName, "ip", a.IP)
	}
	return nil
}
