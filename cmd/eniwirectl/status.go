package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/eniwire/eniwire/controller/api"
)

// agentTimeout bounds every call to the agent: an operator's command must not hang on a stuck agent.
const agentTimeout = 10 * time.Second

// agentView is what status, pods and enis read from the agent.
type agentView struct {
	Status      *api.Status      `json:"status"`
	Assignments []api.Assignment `json:"assignments"`
}

func readAgent(socket string) (*agentView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	c := api.NewClient(socket)
	st, err := c.Status(ctx)
	if err == nil {
		var pods []api.Assignment
		if pods, err = c.Assignments(ctx); err == nil {
			return &agentView{Status: st, Assignments: pods}, nil
		}
	}
	if errors.Is(err, api.ErrUnreachable) {
		return nil, fmt.Errorf("the agent does not answer on %s (is eniwire-agent running? `eniwirectl journal` "+
			"and `eniwirectl maps` work without it): %w", socket, err)
	}
	return nil, err
}

func runStatus(o options, out io.Writer) error {
	v, err := readAgent(o.socket)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(out, v)
	}
	return printStatus(out, v.Status, v.Assignments)
}

func runPods(o options, out io.Writer) error {
	v, err := readAgent(o.socket)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(out, v.Assignments)
	}
	return printPods(out, v.Assignments)
}

func runENIs(o options, out io.Writer) error {
	v, err := readAgent(o.socket)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(out, v.Status.ENIs)
	}
	return printENIs(out, v.Status.ENIs)
}

func printPods(out io.Writer, pods []api.Assignment) error {
	tw := table(out)
	fmt.Fprintln(tw, "POD\tCONTAINER\tIFNAME\tIP\tENI\tHOST VETH\tASSIGNED AT")
	for _, a := range pods {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(strings.Trim(a.Pod.Namespace+"/"+a.Pod.Name, "/")), short(a.ContainerID),
			a.IfName, a.IP, a.ENI, dash(a.HostVeth), a.AssignedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// printENIs prints a row per ENI (IPS counts its IPv4 slots: secondary IPs and prefixes) and under it a row per
// /28 prefix, whose IPS are its 16 addresses.
func printENIs(out io.Writer, enis []api.ENIStatus) error {
	tw := table(out)
	fmt.Fprintln(tw, "ENI\tDEVICE\tSTATE\tPRIMARY\tDELETE-ON-TERM\tSUBNET\tIPS\tASSIGNED\tWARM\tCOOLDOWN\tSECURITY GROUP SET")
	for _, e := range enis {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%v\t%v\t%s\t%d\t%d\t%d\t%d\t%s\n", dash(e.ID), e.DeviceIndex, e.State, e.Primary,
			e.DeleteOnTermination, dash(e.SubnetCIDR), len(e.IPs), e.Assigned, e.Warm, e.Cooldown, dash(e.SecurityGroupSet))
		for _, p := range e.Prefixes {
			fmt.Fprintf(tw, "  prefix %s\t\t\t\t\t\t%d\t%d\t%d\t%d\n", p.CIDR, p.Assigned+p.Warm+p.Cooldown, p.Assigned, p.Warm, p.Cooldown)
		}
	}
	return tw.Flush()
}

func printStatus(out io.Writer, s *api.Status, pods []api.Assignment) error {
	ready := "yes"
	if !s.Ready {
		ready = "no (" + s.Reason + ")"
	}
	fmt.Fprintf(out, "instance %s (%s)  ready: %s\nlimits: %d ENIs, %d IPs per ENI, %d pods\nIPs: %d assigned, %d warm, %d cooldown\n",
		s.InstanceID, s.InstanceType, ready, s.MaxENIs, s.IPsPerENI, s.MaxPods, s.Assigned, s.Warm, s.Cooldown)
	if s.AddsWaiting > 0 {
		fmt.Fprintf(out, "ADDs waiting for an IP: %d\n", s.AddsWaiting)
	}
	if s.PrefixDelegation {
		fmt.Fprintln(out, "prefix delegation: on (/28 prefixes, 16 IPs each)")
	}
	if s.PrefixFallback != "" {
		fmt.Fprintf(out, "prefix fallback: %s\n", s.PrefixFallback)
	}
	if s.Datapath != "" && s.Datapath != api.Healthy {
		fmt.Fprintf(out, "datapath: %s (no pod can be wired)\n", s.Datapath)
	}
	if s.PoolStatus != "" {
		fmt.Fprintf(out, "pool: %s\n", s.PoolStatus)
	}
	if s.CustomNetworking != "" {
		fmt.Fprintln(out, s.CustomNetworking)
	}
	if s.NetworkPolicy != "" {
		fmt.Fprintf(out, "network policy: %s\n", s.NetworkPolicy)
	}
	printSecurityGroupSets(out, s)
	if len(s.Subnets) > 0 {
		var subnets []string
		for _, sn := range s.Subnets {
			note := fmt.Sprintf("%d free", sn.Free)
			if sn.Refused {
				note += ", refused lately"
			}
			subnets = append(subnets, fmt.Sprintf("%s (%s, %s)", sn.ID, sn.CIDR, note))
		}
		fmt.Fprintf(out, "subnets for new ENIs: %s\n", strings.Join(subnets, ", "))
	}
	if len(s.VPCCIDRs) > 0 {
		fmt.Fprintf(out, "VPC CIDRs: %s\n", strings.Join(s.VPCCIDRs, ", "))
	}
	fmt.Fprintln(out)
	if err := printENIs(out, s.ENIs); err != nil {
		return err
	}
	if len(s.Pending) > 0 {
		fmt.Fprintln(out)
		tw := table(out)
		fmt.Fprintln(tw, "PENDING OP\tENI\tSTATE\tSINCE\tLAST ERROR")
		for _, p := range s.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.OpID, dash(p.ENI), p.State, p.Since.UTC().Format(time.RFC3339), dash(p.Error))
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
	return printPods(out, pods)
}

// printSecurityGroupSets prints the SecurityGroupPolicy watch's line and a line per pod security-group set:
// its ENIs, its addresses, the ADDs waiting for it and why it cannot have one.
func printSecurityGroupSets(out io.Writer, s *api.Status) {
	if s.PodSecurityGroups != "" {
		fmt.Fprintf(out, "security groups for pods: %s\n", s.PodSecurityGroups)
	}
	for _, g := range s.SecurityGroupSets {
		line := fmt.Sprintf("security group set %s: ENIs %s; IPs: %d assigned, %d warm, %d cooldown", g.Set,
			dash(strings.Join(g.ENIs, ", ")), g.Assigned, g.Warm, g.Cooldown)
		if g.Waiting > 0 {
			line += fmt.Sprintf("; %d ADDs waiting", g.Waiting)
		}
		if g.Blocked != "" {
			line += "; blocked: " + g.Blocked
		}
		fmt.Fprintln(out, line)
	}
}
