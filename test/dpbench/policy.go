package dpbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/eniwire/eniwire/netpol"
)

// The policy rows (this file) measure the pod's flows to the VPC host with a NetworkPolicy that allows them,
// enforced by eniwire or by SIG Network's reference implementation, against the same flows with no
// policy, on one topology of their own: eniwire's datapath as the agent runs it, NetworkPolicy on.

// policyNode is the node of the policy rows' pod, as its spec.nodeName names it to both enforcers.
const policyNode = "dpbench-node"

// crrTarget and probeTarget are the VPC host's connect/request/close server and the port no policy allows.
var (
	crrTarget   = netip.AddrPortFrom(VPCHostIP, crrPort)
	probeTarget = netip.AddrPortFrom(VPCHostIP, probePort)
)

// PolicyObjects are the Kubernetes objects both enforcers read: the namespace, the measured pod on
// policyNode at PodIP, and a policy that isolates the pod both ways and allows its egress to the VPC host's
// subnet on the measured ports alone (TCP iperf3 and connect/request/close, the UDP echo that Reach uses):
// every measured flow is allowed, its replies by the flow's state, and the probe port is not.
func PolicyObjects() (*corev1.Namespace, *corev1.Pod, *networkingv1.NetworkPolicy) {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{"kubernetes.io/metadata.name": "bench"}},
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "client", UID: "dpbench-client", Labels: map[string]string{"app": "client"}},
		Spec:       corev1.PodSpec{NodeName: policyNode, Containers: []corev1.Container{{Name: "client", Image: "dpbench"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: PodIP.String(), PodIPs: []corev1.PodIP{{IP: PodIP.String()}},
		},
	}
	port := func(proto corev1.Protocol, n int) networkingv1.NetworkPolicyPort {
		p := intstr.FromInt32(int32(n))
		return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "client-to-vpchost"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(VPCHostIP, 24).Masked().String()}}},
				Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, iperfPort), port(corev1.ProtocolTCP, crrPort), port(corev1.ProtocolUDP, echoPort)},
			}},
		},
	}
	return ns, pod, np
}

// Enforcer puts PolicyObjects in force on a topology and lifts it again.
type Enforcer interface {
	// Name is the enforcer's label in tables and JSON: none, eniwire or kube-network-policies.
	Name() string
	// Enforce returns once the policy is in force: the measured flows pass and the probe port does not.
	Enforce(ctx context.Context, t *Topology) error
	// Lift returns once no policy is in force and the flows' state is gone: the probe port answers.
	Lift(ctx context.Context, t *Topology) error
}

// NoPolicy is the baseline: the pod is selected by no policy.
type NoPolicy struct{}

func (NoPolicy) Name() string { return "none" }

func (NoPolicy) Enforce(ctx context.Context, t *Topology) error { return waitLifted(ctx, t) }

func (NoPolicy) Lift(context.Context, *Topology) error { return nil }

// EniwirePolicy compiles PolicyObjects with the agent's compiler (netpol) and writes the pod's state into
// the datapath's policy maps, as the agent's policy watch does.
type EniwirePolicy struct {
	Datapath *Eniwire // installed on the topology, NetworkPolicy on
	compiler *netpol.Compiler
}

func (*EniwirePolicy) Name() string { return "eniwire" }

func (e *EniwirePolicy) Enforce(ctx context.Context, t *Topology) error {
	ns, pod, np := PolicyObjects()
	e.compiler = netpol.NewCompiler(policyNode)
	e.compiler.Hold()
	e.compiler.UpsertNamespace(ns)
	e.compiler.UpsertPod(pod)
	e.compiler.UpsertPolicy(np)
	if err := e.apply(ctx, e.compiler.Flush()); err != nil {
		return err
	}
	return waitEnforced(ctx, t)
}

func (e *EniwirePolicy) Lift(ctx context.Context, t *Topology) error {
	if e.compiler == nil {
		return nil
	}
	_, _, np := PolicyObjects()
	if err := e.apply(ctx, e.compiler.DeletePolicy(np.Namespace, np.Name)); err != nil {
		return err
	}
	e.compiler = nil
	// The flows the policy admitted keep eniwire's conntrack entries until they expire; the baseline's
	// flows start without them.
	if err := forgetPodFlows(t.Node); err != nil {
		return err
	}
	return waitLifted(ctx, t)
}

// apply writes the compiled state of each changed address, as policywatch's apply does.
func (e *EniwirePolicy) apply(ctx context.Context, changed []netip.Addr) error {
	if len(changed) == 0 {
		return errors.New("the compiler changed no pod's state")
	}
	for _, a := range changed {
		var err error
		if p, ok := e.compiler.Policy(a); ok {
			err = e.Datapath.d.SetPodPolicy(ctx, a, p)
		} else {
			err = e.Datapath.d.ClearPodPolicy(ctx, a)
		}
		if err != nil {
			return fmt.Errorf("writing the policy state of %s: %w", a, err)
		}
	}
	return nil
}

// KubeNetworkPolicies runs sigs.k8s.io/kube-network-policies' controller (the knp command, its own module
// in ./knp) on PolicyObjects in the router's namespace: the first namespace on the pod's path whose host
// stack forwards the flows (eniwire's programs send them out of the node's ENI without the node's
// netfilter hooks, where the controller's nftables rules live). eniwire writes no policy state meanwhile.
//
// The controller hands new flows to userspace with nftables' queue statement, which needs the kernel's
// nft_queue (CONFIG_NFT_QUEUE). Where the kernel lacks it, the controller's own rules fail to load, and
// Enforce adds the same diversion in xtables form (knpQueueRules): the verdict on every queued packet is
// still the controller's.
type KubeNetworkPolicies struct {
	Binary string // the built knp command
	Dir    string // scratch directory for the objects file

	// XTQueue is set by Enforce when the kernel lacks nft_queue and the queue rules are knpQueueRules.
	XTQueue bool

	cmd    *exec.Cmd
	output bytes.Buffer
}

// knpTable is the nftables table the controller programs (its default name); knpQueue its default queue.
const (
	knpTable = "kube-network-policies"
	knpQueue = 100
)

func (*KubeNetworkPolicies) Name() string { return "kube-network-policies" }

func (k *KubeNetworkPolicies) Enforce(ctx context.Context, t *Topology) error {
	ns, pod, np := PolicyObjects()
	objects := filepath.Join(k.Dir, "knp-objects.json")
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{ns, pod, np}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(objects, b, 0o600); err != nil {
		return fmt.Errorf("writing the objects of kube-network-policies: %w", err)
	}
	if k.XTQueue, err = lacksNFTQueue(ctx, t.Router); err != nil {
		return err
	}
	k.output.Reset()
	k.cmd = exec.Command("ip", "netns", "exec", t.Router, k.Binary, "-objects", objects, "-node", policyNode,
		"-nfqueue-id", fmt.Sprint(knpQueue))
	k.cmd.Stdout, k.cmd.Stderr = &k.output, &k.output
	if err := k.cmd.Start(); err != nil {
		k.cmd = nil
		return fmt.Errorf("starting kube-network-policies: %w", err)
	}
	if k.XTQueue {
		if err := run(ctx, strings.NewReader(knpQueueRules()), "ip", "netns", "exec", t.Router, "iptables-nft-restore"); err != nil {
			return fmt.Errorf("adding the queue rules of kube-network-policies: %w", err)
		}
	}
	if err := waitEnforced(ctx, t); err != nil {
		return fmt.Errorf("kube-network-policies: %w; its output: %s", err, lastBytes(k.output.Bytes(), 2000))
	}
	return nil
}

// knpQueueRules are the controller's diversion (its postrouting chain, before SNAT) for the one pod a
// policy selects on this node, in iptables-nft form, whose NFQUEUE target the kernel runs through
// nft_compat: packets of established and related flows pass, a new flow's packets from or to the pod go to
// the controller's queue, which drops them while no verdict can be had (no bypass: fail closed, its
// default). Its exceptions for DNS and for the node's root processes are kept too.
func knpQueueRules() string {
	return fmt.Sprintf(`*mangle
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -p udp --dport 53 -j ACCEPT
-A POSTROUTING -m owner --uid-owner 0 -j ACCEPT
-A POSTROUTING -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A POSTROUTING -s %[1]s/32 -j NFQUEUE --queue-num %[2]d
-A POSTROUTING -d %[1]s/32 -j NFQUEUE --queue-num %[2]d
COMMIT
`, PodIP, knpQueue)
}

// knpQueueRulesTable is where knpQueueRules live: iptables-nft's mangle table.
const knpQueueRulesTable = "mangle"

// lacksNFTQueue reports whether the kernel refuses nftables' queue statement in netns name.
func lacksNFTQueue(ctx context.Context, name string) (bool, error) {
	const probe = "dpbench-nft-queue-probe"
	err := run(ctx, strings.NewReader(fmt.Sprintf("table inet %s {\n\tchain c {\n\t\ttype filter hook postrouting priority 0;\n\t\tqueue num %d\n\t}\n}\n", probe, knpQueue)),
		"ip", "netns", "exec", name, "nft", "-f", "-")
	if err == nil {
		return false, run(ctx, nil, "ip", "netns", "exec", name, "nft", "delete", "table", "inet", probe)
	}
	if strings.Contains(err.Error(), "No such file or directory") {
		return true, nil
	}
	return false, fmt.Errorf("probing nftables' queue statement: %w", err)
}

func (k *KubeNetworkPolicies) Lift(ctx context.Context, t *Topology) error {
	if err := k.stop(); err != nil {
		return err
	}
	if k.XTQueue {
		if err := run(ctx, nil, "ip", "netns", "exec", t.Router, "nft", "delete", "table", "ip", knpQueueRulesTable); err != nil {
			return fmt.Errorf("removing the queue rules of kube-network-policies: %w", err)
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", t.Router, "nft", "list", "tables").Output(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("after kube-network-policies stopped, %s holds nftables tables %q (err %v), want none", t.Router, out, err)
	}
	if err := forgetPodFlows(t.Router); err != nil {
		return err
	}
	return waitLifted(ctx, t)
}

// stop ends the controller (SIGTERM: it deletes its table before it exits), waiting 10 s at most.
func (k *KubeNetworkPolicies) stop() error {
	if k.cmd == nil {
		return nil
	}
	cmd := k.cmd
	k.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM) // the one process we started; `ip netns exec` execs knp in place
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("kube-network-policies exited: %w; its output: %s", err, lastBytes(k.output.Bytes(), 2000))
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return errors.New("kube-network-policies did not stop within 10s of SIGTERM")
	}
}

// Close stops the controller if it still runs.
func (k *KubeNetworkPolicies) Close() error { return k.stop() }

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitEnforced waits until the pod completes a transaction on the measured port and not on the probe port.
func waitEnforced(ctx context.Context, t *Topology) error {
	return waitReach(ctx, t, false)
}

// waitLifted waits until the pod completes a transaction on both ports.
func waitLifted(ctx context.Context, t *Topology) error {
	return waitReach(ctx, t, true)
}

func waitReach(ctx context.Context, t *Topology, probe bool) error {
	deadline := time.Now().Add(15 * time.Second)
	var allowed, probed bool
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var err error
		if allowed, err = connects(t, crrTarget, 300*time.Millisecond); err != nil {
			return err
		}
		if probed, err = connects(t, probeTarget, 200*time.Millisecond); err != nil {
			return err
		}
		if allowed && probed == probe {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("within 15s: the pod reached %s: %t, want true; %s: %t, want %t", crrTarget, allowed, probeTarget, probed, probe)
}

// forgetPodFlows deletes the conntrack entries of the pod's address in namespace name.
func forgetPodFlows(name string) error {
	h, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("opening netns %s: %w", name, err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return fmt.Errorf("opening netlink in %s: %w", name, err)
	}
	defer nl.Close()
	var filters []netlink.CustomConntrackFilter
	for _, by := range []netlink.ConntrackFilterType{netlink.ConntrackOrigSrcIP, netlink.ConntrackOrigDstIP} {
		f := &netlink.ConntrackFilter{}
		if err := f.AddIP(by, PodIP.AsSlice()); err != nil {
			return err
		}
		filters = append(filters, f)
	}
	if _, err := nl.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.FAMILY_V4, filters...); err != nil {
		return fmt.Errorf("deleting the pod's conntrack entries in %s: %w", name, err)
	}
	return nil
}
