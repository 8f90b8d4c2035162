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

// maxPodsReport is max-pods' JSON: the instance facts it used and the limit.
type maxPodsReport struct {
	InstanceType string          `json:"instanceType"`
	Limits       metadata.Limits `json:"limits"`
	MaxENI       int             `json:"maxENI,omitempty"`
	pool.PodLimit
}

// runMaxPods prints what kubelet's --max-pods should be (pool.KubeletMaxPods), from the instance
// facts the agent cached in --state-dir when they are for that type, else from EC2's DescribeInstanceTypes
// (the SDK's environment: AWS_REGION, AWS_ENDPOINT_URL_EC2, credentials).
func runMaxPods(o options, out io.Writer) error {
	typ, l, cached := metadata.CachedLimits(o.stateDir)
	if o.instanceType != "" && o.instanceType != typ {
		typ, cached = o.instanceType, false
	}
	if typ == "" {
		return errors.New("max-pods: --instance-type is required (no cached instance facts in --state-dir)")
	}
	if o.maxENI < 0 {
		return fmt.Errorf("max-pods: --max-eni %d: want 0 (the instance's limit) or more", o.maxENI)
	}
	if !cached {
		var err error
		if l, err = describeLimits(typ); err != nil {
			return fmt.Errorf("max-pods: %w", err)
		}
	}
	pl := pool.KubeletMaxPods(pool.PodSettings{MaxENI: o.maxENI, Prefixes: o.prefixes, CustomNetworking: o.customNetworking}, l)
	if o.prefixes && !pl.Prefixes {
		fmt.Fprintf(os.Stderr, "eniwirectl: %s is not built on Nitro (hypervisor %q): no prefix delegation, secondary IPs counted\n", typ, l.Hypervisor)
	}
	if o.output == "json" {
		return writeJSON(out, maxPodsReport{InstanceType: typ, Limits: l, MaxENI: o.maxENI, PodLimit: pl})
	}
	n := pl.MaxPods
	if o.showMaxAllowed {
		n = pl.MaxAllowed
	}
	_, err := fmt.Fprintln(out, n)
	return err
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
