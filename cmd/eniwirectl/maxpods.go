package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/controller/pool"
)

// maxPodsReport is max-pods' JSON: the instance facts it used, where they came from, and the limit.
type maxPodsReport struct {
	InstanceType string          `json:"instanceType"`
	Limits       metadata.Limits `json:"limits"`
	// Source is "cache" (the agent's facts in --state-dir), "shipped" (the facts built into eniwirectl) or
	// "ec2" (DescribeInstanceTypes).
	Source string `json:"source"`
	MaxENI int    `json:"maxENI,omitempty"`
	pool.PodLimit
}

// runMaxPods prints what kubelet's --max-pods should be (pool.KubeletMaxPods), or with --all the table of
// every shipped type. The facts of the type come from the agent's cache in --state-dir when they are for that
// type, else from the facts shipped with eniwirectl, else (an unknown type, or --from-ec2) from EC2's
// DescribeInstanceTypes (the SDK's environment: AWS_REGION, AWS_ENDPOINT_URL_EC2, credentials).
func runMaxPods(o options, out io.Writer) error {
	if o.maxENI < 0 {
		return fmt.Errorf("max-pods: --max-eni %d: want 0 (the instance's limit) or more", o.maxENI)
	}
	if o.all {
		return runMaxPodsAll(o, out)
	}
	typ, l, source, err := instanceFacts(o)
	if err != nil {
		return fmt.Errorf("max-pods: %w", err)
	}
	if o.ipv6 && (o.customNetworking || !l.Nitro()) {
		return fmt.Errorf("max-pods: --ipv6: ENABLE_IPv6 needs a Nitro type (%s: hypervisor %q) and no custom networking", typ, l.Hypervisor)
	}
	pl := pool.KubeletMaxPods(pool.PodSettings{MaxENI: o.maxENI, Prefixes: o.prefixes, CustomNetworking: o.customNetworking, IPv6: o.ipv6}, l)
	if o.prefixes && !pl.Prefixes {
		fmt.Fprintf(os.Stderr, "eniwirectl: %s is not built on Nitro (hypervisor %q): no prefix delegation, secondary IPs counted\n", typ, l.Hypervisor)
	}
	if o.output == "json" {
		return writeJSON(out, maxPodsReport{InstanceType: typ, Limits: l, Source: source, MaxENI: o.maxENI, PodLimit: pl})
	}
	n := pl.MaxPods
	if o.showMaxAllowed {
		n = pl.MaxAllowed
	}
	_, err = fmt.Fprintln(out, n)
	return err
}

// instanceFacts returns the type max-pods is asked about (--instance-type, else the one the agent cached),
// its limits, and where they came from.
func instanceFacts(o options) (typ string, l metadata.Limits, source string, err error) {
	typ, l, cached := metadata.CachedLimits(o.stateDir)
	if o.instanceType != "" && o.instanceType != typ {
		typ, cached = o.instanceType, false
	}
	if typ == "" {
		return "", l, "", errors.New("--instance-type is required (no cached instance facts in --state-dir)")
	}
	switch {
	case o.fromEC2:
	case cached:
		return typ, l, "cache", nil
	default:
		if l, ok := metadata.KnownLimits(typ); ok {
			return typ, l, "shipped", nil
		}
	}
	if l, err = describeLimits(typ); err != nil {
		return "", l, "", err
	}
	return typ, l, "ec2", nil
}

func describeLimits(instanceType string) (metadata.Limits, error) {
	ctx := context.Background()
	sdk, _, err := ec2client.NewSDK(ctx, ec2client.SDKOptions{})
	if err != nil {
		return metadata.Limits{}, err
	}
	api, err := ec2client.New(sdk, ec2client.Config{}, nil, nil)
	if err != nil {
		return metadata.Limits{}, fmt.Errorf("building the EC2 client: %w", err)
	}
	return metadata.LoadLimits(ctx, api, instanceType, "")
}
