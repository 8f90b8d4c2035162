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

// buildResult describes the pair and the pod's address in the current result type; printResult converts it to
// the version the runtime asked for.
func buildResult(cniVersion, netnsPath string, veth *plumbing.Veth, ip net.IP) *current.Result {
	podIdx := 1
	return &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: veth.HostName, Mac: veth.HostMAC.String()},
			{Name: veth.PodIfName, Mac: veth.PodMAC.String(), Sandbox: netnsPath},
		},
		IPs: []*current.IPConfig{{
			Interface: &podIdx,
			Address:   net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)},
			Gateway:   plumbing.GatewayIP,
		}},
		Routes: []*types.Route{{
			Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			GW:  plumbing.GatewayIP,
		}},
	}
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

// podIPFromResult is the first IPv4 address of the pod interface in r.
func podIPFromResult(r *current.Result) net.IP {
	if r == nil {
		return nil
	}
	for _, ipc := range r.IPs {
		if ip := ipc.Address.IP.To4(); ip != nil {
			return ip
		}
	}
	return nil
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
