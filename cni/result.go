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
// to the version the runtime asked for. An IPv6 pod's result lists its IPv6 address on the veth and its IPv4
// egress address on its own interface (plumbing.EgressIfName), which runtimes do not take as the pod's IP.
func buildResult(netnsPath string, veth *plumbing.Veth, a podAddrs) *current.Result {
	podIdx := 1
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: veth.HostName, Mac: veth.HostMAC.String()},
			{Name: veth.PodIfName, Mac: veth.PodMAC.String(), Sandbox: netnsPath},
		},
	}
	ipv4Route := &types.Route{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: plumbing.GatewayIP}
	if !a.ipv6() {
		r.IPs = []*current.IPConfig{{Interface: &podIdx, Address: net.IPNet{IP: a.ip, Mask: net.CIDRMask(32, 32)}, Gateway: plumbing.GatewayIP}}
		r.Routes = []*types.Route{ipv4Route}
		return r
	}
	egressIdx := 2
	r.Interfaces = append(r.Interfaces, &current.Interface{Name: plumbing.EgressIfName, Sandbox: netnsPath})
	r.IPs = []*current.IPConfig{
		{Interface: &podIdx, Address: net.IPNet{IP: a.ip, Mask: net.CIDRMask(128, 128)}, Gateway: plumbing.GatewayIPv6},
		{Interface: &egressIdx, Address: net.IPNet{IP: a.egress, Mask: net.CIDRMask(32, 32)}},
	}
	r.Routes = []*types.Route{
		{Dst: net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, GW: plumbing.GatewayIPv6},
		ipv4Route,
	}
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

// podAddrsFromResult are the addresses r gives the pod: its first IPv4 address alone, or, when r lists an
// IPv6 address, that one with r's IPv4 address as its egress address.
func podAddrsFromResult(r *current.Result) podAddrs {
	var a podAddrs
	if r == nil {
		return a
	}
	var v4 net.IP
	for _, ipc := range r.IPs {
		if ip := ipc.Address.IP.To4(); ip != nil {
			if v4 == nil {
				v4 = ip
			}
		} else if a.ip == nil {
			a.ip = ipc.Address.IP
		}
	}
	if a.ip == nil {
		return podAddrs{ip: v4}
	}
	a.egress = v4
	return a
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
