package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// member is one simulated node under a strategy.
type member interface {
	// start runs the node until stop.
	start(ctx context.Context) error
	// stop ends the node mid-work, as a kill would; what it knew only in memory is gone.
	stop()
	// settled reports whether the node has reached its warm target with DeleteOnTermination on every ENI.
	settled() bool
	// books lists the ENI ids the node knows (its books), primary included.
	books() map[string]bool
	// assign gives a pod an IP; release frees it.
	assign(ctx context.Context, pod string) (string, error)
	// addWaits reports whether the node's ADD waits for its pool's refill (eniwire's; before the node is ready,
	// for EC2's first answer), so that kubelet's pod workers send every pod's ADD at once; else the node
	// answers at once and its pods are asked for in turn.
	addWaits() bool
	release(ctx context.Context, pod string) error
}

// errNoIP is a member's "no free IP now, retry"; errNotReady is "not ready for pods yet".
var (
	errNoIP     = errors.New("no free IP")
	errNotReady = errors.New("not ready for pods")
)

// nodeSettings is what a scenario asks of every node.
type nodeSettings struct {
	warmENI int // 0 means the instance type's maximum ENIs (the seed's setting)
	// prefix: ENABLE_PREFIX_DELEGATION with the product's default targets (WARM_PREFIX_TARGET 1), and kubelet's
	// max pods for the type (the node's vCPUs and hypervisor known).
	prefix    bool
	minimumIP int // MINIMUM_IP_TARGET (0: unset)
	// discovery: the node knows its VPC, so subnet discovery (on by default in the product) finds the pod
	// subnets; the other scenarios keep the node's own subnet only.
	discovery bool
	// addWait is the nodes' ENIWIRE_ADD_WAIT (0: the default; negative: ADDs answered at once).
	addWait   time.Duration
	ec2Config ec2client.Config
	log       *slog.Logger
}

// eniwireNode is a real controller: its own rate-limited EC2 client over its own SDK client, its own journal.
type eniwireNode struct {
	w    *world
	inst ec2sim.Instance
	it   ec2sim.InstanceType
	dir  string
	set  nodeSettings
	run  runner

	mu   sync.Mutex
	node *controller.Node  // replaced on every restart
	api  *ec2client.Client // the node's EC2 client, for tracing
}

func (n *eniwireNode) ctl() *controller.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.node
}

func newEniwireNode(w *world, inst ec2sim.Instance, dir string, set nodeSettings) *eniwireNode {
	it, _ := ec2sim.LookupInstanceType(inst.Type)
	return &eniwireNode{w: w, inst: inst, it: it, dir: filepath.Join(dir, inst.ID), set: set}
}

// nodeInfo is built from the simulator's instance directly instead of IMDS, to keep a thousand nodes cheap; the
// values are the ones IMDS and DescribeInstanceTypes would give.
// In prefix mode it carries the vCPUs and hypervisor too, so the node caps its pool at kubelet's max pods (110 on
// the fleet's types); without them, as in the secondary-IP scenarios, the pool is capped by the ENIs alone.
func (n *eniwireNode) nodeInfo() metadata.Node {
	info := simworld.NodeOf(n.inst, metadata.Limits{MaxENIs: n.it.MaxENIs, IPv4PerENI: n.it.IPv4PerENI})
	if n.set.prefix {
		info.Limits.Hypervisor, info.Limits.VCPUs = n.it.Hypervisor, n.it.VCPUs
	}
	if n.set.discovery {
		info.VPCID = n.inst.VPCID
	}
	return info
}

func (n *eniwireNode) start(ctx context.Context) error {
	cfg := n.set.ec2Config
	cfg.Clock = n.w.clk
	api, err := ec2client.New(n.w.sdk(ec2client.NewSDKRetryer(3), n.answered), cfg, nil, n.set.log)
	if err != nil {
		return fmt.Errorf("building EC2 client of %s: %w", n.inst.ID, err)
	}
	warm := n.set.warmENI
	if warm == 0 && !n.set.prefix {
		warm = n.it.MaxENIs
	}
	node, err := controller.New(controller.Config{StateDir: n.dir, Cluster: "fleet", WarmENITarget: warm, StartJitter: startJitter,
		EnablePrefixDelegation: n.set.prefix, MinimumIPTarget: n.set.minimumIP, AddWait: n.set.addWait,
		// The fleet's pods have no network namespaces: none of them vanished.
		VanishedPodGrace: -1},
		controller.Deps{EC2: api, IMDS: nodeIMDS(n.w.sim, n.inst.ID), Node: n.nodeInfo(), Clock: n.w.clk, Registerer: nopRegisterer{}, Logger: n.set.log,
			Datapath: dptypes.NoDriver{}})
	if err != nil {
		return fmt.Errorf("starting controller of %s: %w", n.inst.ID, err)
	}
	n.mu.Lock()
	n.node, n.api = node, api
	n.mu.Unlock()
	n.run.start(ctx, func(ctx context.Context) { _ = node.Run(ctx) })
	return nil
}

// startJitter spreads the first EC2 work of the nodes of a rollout, as the product recommends.
const startJitter = 2 * time.Second

func (n *eniwireNode) stop() {
	n.run.stop()
	if node := n.ctl(); node != nil {
		_ = node.Close()
	}
}

// answered reports whether the node running now has had EC2's first answer.
func (n *eniwireNode) answered() bool {
	node := n.ctl()
	if node == nil {
		return false
	}
	ok, _ := node.Ready()
	return ok
}

func (n *eniwireNode) settled() bool {
	node := n.ctl()
	if ok, _ := node.Ready(); !ok {
		return false
	}
	st := node.Snapshot()
	ready := 0
	for _, e := range st.ENIs {
		if e.Primary {
			continue
		}
		if e.State != journal.Ready || !e.DeleteOnTermination {
			return false
		}
		ready++
	}
	if n.set.warmENI == 0 && !n.set.prefix {
		return ready == n.it.MaxENIs-1
	}
	return true
}

// Its books also name each journaled ENI operation as "op:<op id>": an ENI that EC2 created but whose answer the
// node has not heard yet (a run that ends mid-call) is the one that operation's ClientToken returns on the next
// drive, not a leak.
func (n *eniwireNode) books() map[string]bool {
	out := map[string]bool{}
	for _, e := range n.ctl().Snapshot().ENIs {
		if e.ID != "" {
			out[e.ID] = true
		}
		if e.OpID != "" {
			out[opKey(e.OpID)] = true
		}
	}
	return out
}

// opKey is how books name an ENI operation; ENIs carry its id in their eniwire.io/op-id tag.
func opKey(op string) string { return "op:" + op }

func (n *eniwireNode) assign(ctx context.Context, pod string) (string, error) {
	a, err := n.ctl().Assign(ctx, api.AssignRequest{Attachment: api.Attachment{ContainerID: pod, IfName: "eth0"}, Netns: "/var/run/netns/" + pod})
	if errors.Is(err, controller.ErrNotReady) {
		return "", errNotReady
	}
	if errors.Is(err, controller.ErrNoIP) || errors.Is(err, controller.ErrMaxPods) {
		return "", errNoIP
	}
	if err != nil {
		return "", err
	}
	return a.IP, nil
}

func (n *eniwireNode) addWaits() bool { return n.set.addWait >= 0 }

func (n *eniwireNode) release(ctx context.Context, pod string) error {
	_, err := n.ctl().Release(ctx, api.ReleaseRequest{Attachment: api.Attachment{ContainerID: pod, IfName: "eth0"}})
	return err
}
