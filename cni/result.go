package cni

import (
	"encoding/json"
	"fmt"
	"io"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/eniwire/eniwire/cni/plumbing"
)

// buildResult describes the pair and the pod's addresses in the current result type; printResult converts it
// to the version the runtime asked for. The pod's IPv4 and IPv6 addresses are on the veth, IPv4 first (a
// dual-stack pod has both), each with its default route; an IPv6 pod's IPv4 egress address is on its own
// interface (plumbing.EgressIfName), which runtimes do not take as the pod's IP.
func buildResult(netnsPath string, veth *plumbing.Veth, a podAddrs) *current.Result {
	podIdx := 1
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: veth.HostName, Mac: veth.HostMAC.String()},
			{Name: veth.PodIfName, Mac: veth.PodMAC.String(), Sandbox: netnsPath},
		},
	}
	if a.v4 != nil {
		r.IPs = append(r.IPs, &current.IPConfig{Interface: &podIdx, Address: net.IPNet{IP: a.v4, Mask: net.CIDRMask(32, 32)}, Gateway: plumbing.GatewayIP})
	}
	if a.v6 != nil {
		r.IPs = append(r.IPs, &current.IPConfig{Interface: &podIdx, Address: net.IPNet{IP: a.v6, Mask: net.CIDRMask(128, 128)}, Gateway: plumbing.GatewayIPv6})
		r.Routes = append(r.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, GW: plumbing.GatewayIPv6})
	}
	if a.egress != nil {
		egressIdx := len(r.Interfaces)
		r.Interfaces = append(r.Interfaces, &current.Interface{Name: plumbing.EgressIfName, Sandbox: netnsPath})
		r.IPs = append(r.IPs, &current.IPConfig{Interface: &egressIdx, Address: net.IPNet{IP: a.egress, Mask: net.CIDRMask(32, 32)}})
	}
	// Every pod has the IPv4 default route: from its IPv4 address, or an IPv6 pod's from its egress address.
	r.Routes = append(r.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: plumbing.GatewayIP})
	return r
}

// printResult is types.PrintResult with the writer injected, so in-process tests read what the binary prints.
func printResult(w io.Writer, result *current.Result, cniVersion string) error {
	converted, err := result.GetAsVersion(cniVersion)
	if err != nil {
		return fmt.Errorf("converting the result to %s: %w", cniVersion, err)
	}
	b, err := json.MarshalIndent(converted, "", "    ")
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// prevResult returns the runtime's copy of what ADD printed, in the current type, or nil when there is none.
func prevResult(conf *Conf) *current.Result {
	if conf.PrevResult == nil {
		return nil
	}
	r, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return nil
	}
	return r
}

// podAddrsFromResult are the addresses r gives the pod: its first IPv4 and first IPv6 address on the pod's
// interface, and the first IPv4 address on the egress interface (plumbing.EgressIfName) as an IPv6 pod's
// egress address.
func podAddrsFromResult(r *current.Result) podAddrs {
	var a podAddrs
	if r == nil {
		return a
	}
	for _, ipc := range r.IPs {
		ip := ipc.Address.IP
		switch {
		case ip.To4() != nil && onEgressInterface(r, ipc):
			if a.egress == nil {
				a.egress = ip.To4()
			}
		case ip.To4() != nil:
			if a.v4 == nil {
				a.v4 = ip.To4()
			}
		case a.v6 == nil:
			a.v6 = ip
		}
	}
	return a
}

// onEgressInterface reports whether ipc is on r's egress interface (plumbing.EgressIfName).
func onEgressInterface(r *current.Result, ipc *current.IPConfig) bool {
	return ipc.Interface != nil && *ipc.Interface >= 0 && *ipc.Interface < len(r.Interfaces) &&
		r.Interfaces[*ipc.Interface].Name == plumbing.EgressIfName
}

// hostIfaceFromResult is the interface of r that lives outside the sandbox: the host veth.
func hostIfaceFromResult(r *current.Result) *current.Interface {
	if r == nil {
		return nil
	}
	for _, i := range r.Interfaces {
		if i.Sandbox == "" && i.Name != "" {
			return i
		}
	}
	return nil
}
