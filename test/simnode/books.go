package simnode

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// BookRow is one ENI as the agent's books and EC2 (the simulator) each hold it.
type BookRow struct {
	ID string
	// Agent* come from the agent's status (empty AgentState: not in the books).
	AgentState  string
	AgentDoT    bool
	DeviceIndex int
	AgentIPs    int
	// EC2* come from the simulator (empty EC2Status: no such ENI).
	EC2Status     string
	EC2Attachment string // "attached to <instance>" or ""
	EC2DoT        bool
	EC2IPs        int
	Ours          bool // tagged with this instance's id
}

// Books compares the agent's ENIs with EC2's ENIs of this instance.
type Books struct {
	Rows []BookRow
	// Leaked: ENIs tagged as ours that EC2 holds but the books do not (attached or available).
	Leaked []string
	// Lost: ENIs in the books that EC2 does not have attached to this instance.
	Lost []string
}

// Match reports whether nothing leaked or was lost.
func (b Books) Match() bool { return len(b.Leaked) == 0 && len(b.Lost) == 0 }

// CompareBooks reads the agent's status and the simulator's ENIs and lines them up.
func (n *Node) CompareBooks(ctx context.Context) (Books, error) {
	st, err := n.Agent.Status(ctx)
	if err != nil {
		return Books{}, err
	}
	return LineUpBooks(n.Instance.ID, st.ENIs, n.Sim.Snapshot().ENIs), nil
}

// LineUpBooks lines up the agent's ENIs (its status) with EC2's ENIs of the instance.
func LineUpBooks(instanceID string, agent []api.ENIStatus, ec2 []ec2sim.ENIState) Books {
	rows := map[string]*BookRow{}
	row := func(id string) *BookRow {
		if rows[id] == nil {
			rows[id] = &BookRow{ID: id}
		}
		return rows[id]
	}
	for _, e := range agent {
		r := row(e.ID)
		r.AgentState, r.AgentDoT, r.DeviceIndex, r.AgentIPs = e.State, e.DeleteOnTermination, e.DeviceIndex, len(e.IPs)
	}
	for _, e := range ec2 {
		attachedHere := e.Attachment != nil && e.Attachment.InstanceID == instanceID
		ours := e.Tags[eni.TagOwner] == instanceID
		if !attachedHere && !ours {
			continue
		}
		r := row(e.ID)
		r.EC2Status, r.Ours, r.EC2IPs = e.Status, ours, len(e.IPs)
		if attachedHere {
			r.EC2Attachment = "attached to " + instanceID
			r.EC2DoT = e.Attachment.DeleteOnTermination
			if r.AgentState == "" {
				r.DeviceIndex = e.Attachment.DeviceIndex
			}
		}
	}
	var b Books
	for _, r := range rows {
		b.Rows = append(b.Rows, *r)
		switch {
		case r.AgentState == "" && r.EC2Status != "":
			b.Leaked = append(b.Leaked, r.ID)
		case r.AgentState != "" && r.EC2Attachment == "":
			b.Lost = append(b.Lost, r.ID)
		}
	}
	slices.SortFunc(b.Rows, func(x, y BookRow) int { return x.DeviceIndex - y.DeviceIndex })
	slices.Sort(b.Leaked)
	slices.Sort(b.Lost)
	return b
}

// ExitENI sends lines TCP exchanges from the pod to an Echo at dst and says which of the instance's ENIs
// the packets left through, by the router-side packet counters of every attached ENI before and after: the
// one that received at least lines packets the most. seen is the source address the server saw.
func (n *Node) ExitENI(ctx context.Context, p *Pod, dst netip.AddrPort, lines int) (eniID string, seen netip.Addr, err error) {
	var ids []string
	for _, e := range n.Sim.Snapshot().ENIs {
		if e.Attachment != nil && e.Attachment.InstanceID == n.Instance.ID {
			ids = append(ids, e.ID)
		}
	}
	before := map[string]uint64{}
	for _, id := range ids {
		if before[id], _, err = n.Fabric.ENICounters(id); err != nil {
			return "", netip.Addr{}, fmt.Errorf("reading the counters of ENI %s: %w", id, err)
		}
	}
	if seen, err = Talk(ctx, p.NetnsPath, dst, lines); err != nil {
		return "", netip.Addr{}, fmt.Errorf("%s (%s) -> %s: %w", p.Name, p.IP, dst, err)
	}
	var most uint64
	for _, id := range ids {
		after, _, err := n.Fabric.ENICounters(id)
		if err != nil {
			return "", netip.Addr{}, fmt.Errorf("reading the counters of ENI %s: %w", id, err)
		}
		if d := after - before[id]; d >= uint64(lines) && d > most {
			eniID, most = id, d
		}
	}
	return eniID, seen, nil
}
