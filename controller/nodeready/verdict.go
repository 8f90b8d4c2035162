// Package nodeready tells Kubernetes whether this node can give new pods IPs: it keeps the Node condition
// eniwire.io/IPAMReady true or false with the reason and the agent's words, and removes the startup taint
// node.eniwire.io/agent-not-ready that the node registered with once the datapath is loaded and the pool holds
// IPs. The scheduler then sends no pod before the agent can address it, and an autoscaler or an operator reads
// why a node cannot take more.
package nodeready

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/controller/api"
)

const (
	// TaintKey is the startup taint (effect NoSchedule) the node registers with, kubelet's
	// --register-with-taints or a Karpenter NodePool's startupTaints; the agent removes it.
	TaintKey = "node.eniwire.io/agent-not-ready"
	// ConditionType is the Node condition the agent keeps.
	ConditionType corev1.NodeConditionType = "eniwire.io/IPAMReady"
)

// Reasons of the condition besides the pool's own (api.Pool*).
const (
	ReasonStarting     = "AgentStarting" // the journal is being replayed or EC2 has not answered yet
	ReasonJournal      = "JournalBroken" // the journal takes no writes: no ADD can work
	ReasonDatapath     = "DatapathDown"  // the datapath brought none of the node's ENIs up
	ReasonIPsFree      = "IPsFree"       // the pool holds free IPs
	ReasonPoolGrowing  = "PoolGrowing"   // no free IP, and nothing stops the pool growing
	messageIPsFree     = "the pool holds free IPs for new pods"
	messagePoolGrowing = "no free IP right now; the pool is growing and new pods get theirs as it lands"
)

// Verdict is what the condition says: true when the node can address new pods, and why.
type Verdict struct {
	Ready           bool
	Reason, Message string
}

// Judge turns the agent's status into the condition's verdict. Free IPs make the node ready even while the
// pool cannot grow (the message then says why it cannot); no free IP with a reason the pool cannot grow
// (max pods, the ENI limit, a full subnet, EC2 refusing) makes it not ready, with that reason.
//
// A pod security-group set that cannot have an address (no ENI slot, EC2 refusing its groups) does not
// change the verdict, since the node's other pods still get theirs: the message names it after the rest.
func Judge(st *api.Status) Verdict {
	v := judgePool(st)
	for _, g := range st.SecurityGroupSets {
		if g.Blocked != "" {
			v.Message += fmt.Sprintf("; pods of security-group set %s get no IP: %s", g.Set, g.Blocked)
		}
	}
	return v
}

// judgePool is Judge's verdict on the node's own pool.
func judgePool(st *api.Status) Verdict {
	switch {
	case !st.Ready:
		return Verdict{Reason: ReasonStarting, Message: "the agent is not ready: " + st.Reason}
	case st.Journal != "" && st.Journal != api.Healthy:
		return Verdict{Reason: ReasonJournal, Message: st.Journal}
	case st.Datapath != "" && st.Datapath != api.Healthy:
		return Verdict{Reason: ReasonDatapath, Message: st.Datapath}
	case st.Warm > 0 && st.PoolReason != "":
		return Verdict{Ready: true, Reason: ReasonIPsFree, Message: fmt.Sprintf("%s, but the pool cannot grow (%s): %s",
			messageIPsFree, st.PoolReason, st.PoolStatus)}
	case st.Warm > 0:
		return Verdict{Ready: true, Reason: ReasonIPsFree, Message: messageIPsFree}
	case st.PoolReason != "":
		return Verdict{Reason: st.PoolReason, Message: st.PoolStatus}
	}
	return Verdict{Ready: true, Reason: ReasonPoolGrowing, Message: messagePoolGrowing}
}

// HoldsIPs reports whether the startup taint may go: the agent is ready, its datapath loaded, and the pool
// holds IPs (free or assigned to pods).
func HoldsIPs(st *api.Status) bool {
	return st.Ready && (st.Datapath == "" || st.Datapath == api.Healthy) && st.Warm+st.Assigned > 0
}

// condition is the verdict as a Node condition at now; since is when its status last changed, kept when it
// did not.
func (v Verdict) condition(prev *corev1.NodeCondition, now metav1.Time) corev1.NodeCondition {
	status := corev1.ConditionFalse
	if v.Ready {
		status = corev1.ConditionTrue
	}
	since := now
	if prev != nil && prev.Status == status {
		since = prev.LastTransitionTime
	}
	return corev1.NodeCondition{Type: ConditionType, Status: status, Reason: v.Reason, Message: v.Message,
		LastHeartbeatTime: now, LastTransitionTime: since}
}

// shows reports whether c already says v.
func (v Verdict) shows(c *corev1.NodeCondition) bool {
	return c != nil && (c.Status == corev1.ConditionTrue) == v.Ready && c.Reason == v.Reason && c.Message == v.Message
}
