package simnode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

// ErrPodExists is returned by AddPod for a name already in use on the node.
var ErrPodExists = errors.New("pod already exists")

// Pod is a network namespace wired through CNI ADD, as a runtime's pod sandbox.
type Pod struct {
	Name string
	// Netns is the namespace's name (for `ip netns exec`), NetnsPath its path (for Do, Listen, dialing).
	Netns, NetnsPath string
	IP               netip.Addr
	// EgressIP is an IPv6 pod's IPv4 egress address (the agent's IPv6 mode); the zero Addr otherwise.
	EgressIP netip.Addr
	// IPv6 is a dual-stack pod's IPv6 address beside its IPv4 in IP (the agent's dual-stack mode); the zero
	// Addr otherwise.
	IPv6 netip.Addr
	// ENI is the id of the ENI the agent took the IP from, DeviceIndex its attachment's.
	ENI         string
	DeviceIndex int
	rt          *libcni.RuntimeConf
}

// newNetns makes the named netns "<node>-p-<pod>" with lo up.
func (n *Node) newNetns(pod string) (name, path string, err error) {
	name = n.Name + "-p-" + pod
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("creating netns %s: %w: %s", name, err, out)
	}
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		_ = exec.Command("ip", "netns", "del", name).Run()
		return "", "", fmt.Errorf("setting lo up in %s: %w: %s", name, err, out)
	}
	return name, filepath.Join("/run/netns", name), nil
}

func (p *Pod) removeNetns() error {
	if out, err := exec.Command("ip", "netns", "del", p.Netns).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("deleting netns %s: %w: %s", p.Netns, err, out)
	}
	return nil
}

// conflist loads the conflist the agent installed.
func (n *Node) conflist() (*libcni.NetworkConfigList, error) {
	l, err := libcni.ConfListFromFile(filepath.Join(n.ConfDir, ConflistName))
	if err != nil {
		return nil, fmt.Errorf("reading the installed conflist: %w", err)
	}
	return l, nil
}

// inNode runs f on a thread inside the node netns, so the plugins libcni execs start there.
func (n *Node) inNode(f func() error) error {
	var err error
	if doErr := vpcfabric.Do(n.Netns.NetnsPath, func() error { err = f(); return nil }); doErr != nil {
		return doErr
	}
	return err
}

// AddPod creates the pod's netns and runs CNI ADD through libcni, retrying while the agent answers with a
// retryable error (the pool still filling), as kubelet would, until ctx ends, then waits until the VPC router
// routes the pod's address.
func (n *Node) AddPod(ctx context.Context, name string) (*Pod, error) {
	n.mu.Lock()
	if _, ok := n.pods[name]; ok || n.closed {
		n.mu.Unlock()
		return nil, fmt.Errorf("adding pod %s: %w", name, ErrPodExists)
	}
	n.mu.Unlock()
	list, err := n.conflist()
	if err != nil {
		return nil, err
	}
	nsName, nsPath, err := n.newNetns(name)
	if err != nil {
		return nil, err
	}
	p := &Pod{Name: name, Netns: nsName, NetnsPath: nsPath, rt: &libcni.RuntimeConf{
		ContainerID: name + "-" + n.Name, NetNS: nsPath, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "simnode"}, {"K8S_POD_NAME", name}, {"K8S_POD_UID", "uid-" + name}},
	}}
	n.mu.Lock()
	n.pods[name] = p
	n.mu.Unlock()
	for {
		var res *current.Result
		err := n.inNode(func() error {
			c, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			r, err := n.cni.AddNetworkList(c, list, p.rt)
			if err != nil {
				return err
			}
			res, err = current.NewResultFromResult(r)
			return err
		})
		if err == nil {
			if p.IP, p.IPv6, p.EgressIP, err = podAddrs(res); err != nil {
				return nil, fmt.Errorf("CNI ADD of %s: %w", name, err)
			}
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("CNI ADD of %s: %w (%v)", name, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	as, err := n.Agent.Client.Assignments(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the agent's assignments: %w", err)
	}
	for _, a := range as {
		if ip, _ := netip.ParseAddr(a.IP); ip == p.IP {
			p.ENI, p.DeviceIndex = a.ENI, a.DeviceIndex
		}
	}
	if p.ENI == "" {
		return nil, fmt.Errorf("finding the agent's assignment of %s (%s): none", name, p.IP)
	}
	if err := n.waitRouted(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// podAddrs reads a pod's addresses from its ADD result: one IPv4 address; (dual-stack mode) an IPv4 and an
// IPv6 address on eth0; or (IPv6 mode) an IPv6 address on eth0 and an IPv4 egress address on another
// interface.
func podAddrs(res *current.Result) (ip, ipv6, egress netip.Addr, err error) {
	if len(res.IPs) == 1 {
		ip, _ = netip.AddrFromSlice(res.IPs[0].Address.IP.To4())
		return ip, ipv6, egress, nil
	}
	var v4 netip.Addr
	for _, ipc := range res.IPs {
		a, _ := netip.AddrFromSlice(ipc.Address.IP)
		a = a.Unmap()
		onEth0 := ipc.Interface != nil && res.Interfaces[*ipc.Interface].Name == "eth0"
		switch {
		case a.Is4() && onEth0:
			v4 = a
		case a.Is4():
			egress = a
		case onEth0:
			ipv6 = a
		}
	}
	switch {
	case len(res.IPs) == 2 && v4.IsValid() && ipv6.IsValid():
		return v4, ipv6, egress, nil
	case len(res.IPs) == 2 && ipv6.IsValid() && egress.IsValid():
		return ipv6, netip.Addr{}, egress, nil
	}
	return ip, ipv6, egress, fmt.Errorf("the result lists %d IPs, want one IPv4 address, an IPv4 and an IPv6 address on eth0, "+
		"or an IPv6 address on eth0 and an IPv4 egress address", len(res.IPs))
}

// CheckPod runs CNI CHECK for the pod.
func (n *Node) CheckPod(ctx context.Context, p *Pod) error {
	list, err := n.conflist()
	if err != nil {
		return err
	}
	if err := n.inNode(func() error { return n.cni.CheckNetworkList(ctx, list, p.rt) }); err != nil {
		return fmt.Errorf("CNI CHECK of %s: %w", p.Name, err)
	}
	return nil
}

// DelPod runs CNI DEL for the pod and deletes its netns.
func (n *Node) DelPod(ctx context.Context, p *Pod) error {
	var errs []error
	if list, err := n.conflist(); err != nil {
		errs = append(errs, err)
	} else if err := n.inNode(func() error { return n.cni.DelNetworkList(ctx, list, p.rt) }); err != nil {
		errs = append(errs, fmt.Errorf("CNI DEL of %s: %w", p.Name, err))
	}
	if err := p.removeNetns(); err != nil {
		errs = append(errs, err)
	}
	n.mu.Lock()
	delete(n.pods, p.Name)
	n.mu.Unlock()
	return errors.Join(errs...)
}

// Pods lists the node's pods in no particular order.
func (n *Node) Pods() []*Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*Pod, 0, len(n.pods))
	for _, p := range n.pods {
		out = append(out, p)
	}
	return out
}

// waitRouted waits until the VPC router routes the pod's address to its ENI: the fabric follows the
// simulator's events, so this may trail the assignment by a moment.
func (n *Node) waitRouted(ctx context.Context, p *Pod) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Fabric.WaitIP(wctx, p.IP); err != nil {
		return fmt.Errorf("waiting for the router to route %s: %w", p.IP, err)
	}
	return nil
}

// Output runs a command in the node netns (`ip netns exec`) and returns its stdout.
func (n *Node) Output(ctx context.Context, stdin, name string, args ...string) (string, error) {
	cmd := n.Netns.Command(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("running %s %s in the node: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
