package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
)

// maxPodsRow is one type of max-pods --all: its facts and kubelet's --max-pods in every mode.
type maxPodsRow struct {
	InstanceType string          `json:"instanceType"`
	Limits       metadata.Limits `json:"limits"`
	// SecondaryIPs is the default mode; its MaxAllowed is the AWS VPC CNI's eni-max-pods.txt value.
	SecondaryIPs     pool.PodLimit `json:"secondaryIPs"`
	PrefixDelegation pool.PodLimit `json:"prefixDelegation"`
	// CustomNetworking and CustomNetworkingPrefixes: the primary ENI carries no pods.
	CustomNetworking         pool.PodLimit `json:"customNetworking"`
	CustomNetworkingPrefixes pool.PodLimit `json:"customNetworkingPrefixes"`
	// IPv6 is ENABLE_IPv6 (pods on the primary ENI's /80); absent on a type that takes no IPv6 prefix.
	IPv6 *pool.PodLimit `json:"ipv6,omitempty"`
}

// maxPodsTable is max-pods --all's JSON.
type maxPodsTable struct {
	// Facts says where and when the shipped facts were taken.
	Facts  string       `json:"facts"`
	MaxENI int          `json:"maxENI,omitempty"`
	Types  []maxPodsRow `json:"types"`
}

// runMaxPodsAll prints kubelet's --max-pods for every instance type shipped with eniwirectl, in every mode
// (for launch templates and Karpenter's NodePools): no AWS access needed. --max-eni applies to every row.
func runMaxPodsAll(o options, out io.Writer) error {
	if o.instanceType != "" || o.prefixes || o.customNetworking || o.ipv6 || o.showMaxAllowed || o.fromEC2 {
		return errors.New("max-pods --all: prints every type in every mode; only --max-eni and --output apply")
	}
	names, taken := metadata.KnownTypes()
	tbl := maxPodsTable{Facts: taken, MaxENI: o.maxENI}
	for _, name := range names {
		l, _ := metadata.KnownLimits(name)
		limit := func(prefixes, custom bool) pool.PodLimit {
			return pool.KubeletMaxPods(pool.PodSettings{MaxENI: o.maxENI, Prefixes: prefixes, CustomNetworking: custom}, l)
		}
		row := maxPodsRow{InstanceType: name, Limits: l, SecondaryIPs: limit(false, false),
			PrefixDelegation: limit(true, false), CustomNetworking: limit(false, true), CustomNetworkingPrefixes: limit(true, true)}
		if l.Nitro() {
			v6 := pool.KubeletMaxPods(pool.PodSettings{MaxENI: o.maxENI, IPv6: true}, l)
			row.IPv6 = &v6
		}
		tbl.Types = append(tbl.Types, row)
	}
	if o.output == "json" {
		return writeJSON(out, tbl)
	}
	fmt.Fprintf(out, "# %s\n", taken)
	fmt.Fprintln(out, "# UNCAPPED: secondary IPs without kubelet's 110/250 ceiling (eni-max-pods.txt); the other columns are capped.")
	w := table(out)
	fmt.Fprintln(w, "TYPE\tENIS\tIPV4/ENI\tHYPERVISOR\tVCPUS\tUNCAPPED\tSECONDARY-IPS\tPREFIXES\tCUSTOM-NETWORKING\tCUSTOM+PREFIXES\tIPV6")
	for _, r := range tbl.Types {
		hv := r.Limits.Hypervisor
		if hv == "" {
			hv = "-"
		}
		v6 := "-" // a type that takes no IPv6 prefix
		if r.IPv6 != nil {
			v6 = fmt.Sprint(r.IPv6.MaxPods)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", r.InstanceType, r.Limits.MaxENIs, r.Limits.IPv4PerENI, hv,
			r.Limits.VCPUs, r.SecondaryIPs.MaxAllowed, r.SecondaryIPs.MaxPods, r.PrefixDelegation.MaxPods,
			r.CustomNetworking.MaxPods, r.CustomNetworkingPrefixes.MaxPods, v6)
	}
	return w.Flush()
}
