package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/eniwire/eniwire/controller/api"
)

// runPolicy prints the NetworkPolicy the agent compiled for a pod of its node (NAMESPACE/NAME, or NAME in
// default) and, with --explain, whether a flow is allowed and by which policy.
func runPolicy(o options, out io.Writer) error {
	if len(o.args) != 1 {
		return errors.New("policy: name one pod, NAMESPACE/NAME (e.g. eniwirectl policy shop/web --explain 'from 10.0.1.5 tcp/8080')")
	}
	pod := o.args[0]
	if !strings.Contains(pod, "/") {
		pod = "default/" + pod
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	r, err := api.NewClient(o.socket).Policy(ctx, pod, o.explain)
	if errors.Is(err, api.ErrUnreachable) {
		return fmt.Errorf("the agent does not answer on %s (is eniwire-agent running? `eniwirectl maps` shows the "+
			"pods' policy ids without it): %w", o.socket, err)
	}
	if err != nil && strings.Contains(err.Error(), "no endpoint GET "+api.PathPolicy) {
		return fmt.Errorf("the agent serves no NetworkPolicy (ENABLE_NETWORK_POLICY is false, or the datapath is not bpf): %w", err)
	}
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(out, r)
	}
	return printPolicy(out, r)
}

func printPolicy(out io.Writer, r *api.PolicyReport) error {
	fmt.Fprintf(out, "pod %s at %s\n", r.Pod, dash(strings.Join(r.Addresses, ", ")))
	if len(r.Addresses) == 0 {
		fmt.Fprintln(out, "no address yet: nothing compiled")
		return nil
	}
	if len(r.Policies) == 0 {
		fmt.Fprintln(out, "no policy selects the pod: not isolated, every flow allowed")
	} else {
		fmt.Fprintf(out, "selected by: %s\n", strings.Join(r.Policies, ", "))
	}
	if r.Failure != "" {
		fmt.Fprintf(out, "NOT WRITTEN: the pod allows nothing (%s)\n", r.Failure)
	}
	for _, d := range []struct {
		name     string
		isolated bool
		peers    []api.PolicyPeer
		peer     string
	}{
		{"ingress", r.IngressIsolated, r.Ingress, "FROM"},
		{"egress", r.EgressIsolated, r.Egress, "TO"},
	} {
		if !d.isolated {
			fmt.Fprintf(out, "%s: not isolated\n", d.name)
			continue
		}
		fmt.Fprintf(out, "%s: isolated, %d peer prefixes (the longest prefix holding a peer decides)\n", d.name, len(d.peers))
		if len(d.peers) == 0 {
			continue
		}
		tw := table(out)
		fmt.Fprintf(tw, "  %s\tPORTS\n", d.peer)
		for _, p := range d.peers {
			ports := strings.Join(p.Ports, ", ")
			if ports == "" {
				ports = "none (an except)"
			}
			fmt.Fprintf(tw, "  %s\t%s\n", p.Peer, ports)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if e := r.Explanation; e != nil {
		fmt.Fprintf(out, "%s: %s\n", e.Flow, e.Reason)
	}
	return nil
}
