package cni

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// Status tells the runtime whether ADD can work at all: it fails with ErrPluginNotAvailable while the agent
// cannot be reached, is not ready (starting), its journal is broken or its datapath can wire no pod. A pool
// with no free IP answers success: a full node (max pods reached, every ENI full) or a burst that empties the
// pool for a moment is a healthy network, and a runtime turns a STATUS failure into the node's Ready going
// false, which evicts its pods. The agent's status and metrics report the pool instead, and ADD fails
// retryably while it is empty.
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
	// An agent that predates Journal and Datapath leaves them empty; its Ready covers the journal.
	if st.Journal != "" && st.Journal != api.Healthy {
		return types.NewError(types.ErrPluginNotAvailable, "eniwire: the eniwire agent's journal is broken: "+st.Journal, "")
	}
	if !st.Ready {
		return types.NewError(types.ErrPluginNotAvailable, "eniwire: the eniwire agent is not ready: "+st.Reason, "")
	}
	if st.Datapath != "" && st.Datapath != api.Healthy {
		return types.NewError(types.ErrPluginNotAvailable, "eniwire: the eniwire datapath can wire no pod: "+st.Datapath, "")
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
