package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// simEC2 points the SDK's environment at a simulator's EC2 API for the test.
func simEC2(t *testing.T) {
	t.Helper()
	srv := httptest.NewServer(ec2sim.New(ec2sim.DefaultConfig()).EC2Handler())
	t.Cleanup(srv.Close)
	ec2sim.SetSDKEnv(t, srv.URL, "us-west-2")
}

func maxPods(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(append([]string{"max-pods", "--state-dir", t.TempDir()}, args...), &out); err != nil {
		t.Fatalf("max-pods %v: %v", args, err)
	}
	return strings.TrimSpace(out.String())
}

// TestMaxPodsMatchesAWSPublishedValues checks max-pods, through DescribeInstanceTypes, against the AWS VPC
// CNI's published eni-max-pods.txt (secondary IPs, no ceiling: --show-max-allowed) and against what its
// max-pods-calculator.sh prints (the 110/250 ceiling, with and without --cni-prefix-delegation-enabled).
func TestMaxPodsMatchesAWSPublishedValues(t *testing.T) {
	simEC2(t)
	for _, c := range []struct {
		typ                         string
		published, capped, prefixes int
	}{
		{"t3.micro", 4, 4, 34},
		{"t3.small", 11, 11, 110},
		{"t3.medium", 17, 17, 110},
		{"t3.large", 35, 35, 110},
		{"m5.large", 29, 29, 110},
		{"m5.xlarge", 58, 58, 110},
		{"m5.2xlarge", 58, 58, 110},
		{"m5.4xlarge", 234, 110, 110},
		{"m5.24xlarge", 737, 250, 250},
		{"c5.large", 29, 29, 110},
		{"c5.xlarge", 58, 58, 110},
		{"c5.18xlarge", 737, 250, 250},
		// Multi-card: only the default card's ENIs count, as in eni-max-pods.txt.
		{"p4d.24xlarge", 737, 250, 250},
		// Xen: no prefixes, the calculator falls back to secondary IPs.
		{"m4.large", 20, 20, 20},
		{"m4.4xlarge", 234, 110, 110},
	} {
		t.Run(c.typ, func(t *testing.T) {
			for _, v := range []struct {
				args []string
				want int
			}{
				{[]string{"--show-max-allowed"}, c.published},
				{nil, c.capped},
				{[]string{"--prefix-delegation"}, c.prefixes},
			} {
				if got := maxPods(t, append([]string{"--instance-type", c.typ, "--from-ec2"}, v.args...)...); got != strconv.Itoa(v.want) {
					t.Errorf("max-pods %v = %s, want %d", v.args, got, v.want)
				}
			}
		})
	}
}

func TestMaxPodsCountsOnlyMaxENI(t *testing.T) {
	simEC2(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--instance-type", "m5.large", "--max-eni", "2"}, "20"},                               // 2 x 9 + 2
		{[]string{"--instance-type", "m5.large", "--max-eni", "9"}, "29"},                               // above the type's 3: the type's
		{[]string{"--instance-type", "t3.micro", "--max-eni", "1", "--prefix-delegation"}, "18"},        // 1 x 1 x 16 + 2
		{[]string{"--instance-type", "m5.large", "--custom-networking"}, "20"},                          // (3-1) x 9 + 2, the calculator's --cni-custom-networking-enabled
		{[]string{"--instance-type", "m5.4xlarge", "--custom-networking", "--show-max-allowed"}, "205"}, // (8-1) x 29 + 2, uncapped
		{[]string{"--instance-type", "m5.large", "--ipv6"}, "110"},                                      // the prefix-delegation number: 434, capped
		{[]string{"--instance-type", "t3.micro", "--ipv6"}, "34"},                                       // 2 x 1 x 16 + 2, as with --prefix-delegation
	} {
		if got := maxPods(t, c.args...); got != c.want {
			t.Errorf("max-pods %v = %s, want %s", c.args, got, c.want)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"max-pods", "--instance-type", "m5.large", "--prefix-delegation", "--output", "json", "--state-dir", t.TempDir()}, &out); err != nil {
		t.Fatal(err)
	}
	var rep maxPodsReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON %s: %v", out.String(), err)
	}
	if rep.MaxAllowed != 434 || rep.Ceiling != 110 || rep.MaxPods != 110 || !rep.PodLimit.Prefixes || rep.Limits.VCPUs != 2 {
		t.Errorf("report = %+v", rep)
	}
}

func TestMaxPodsUsesTheAgentsCachedFacts(t *testing.T) {
	simEC2(t)
	ctx := context.Background()
	sdk, _, err := ec2client.NewSDK(ctx, ec2client.SDKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api, err := ec2client.New(sdk, ec2client.Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	if _, err := metadata.LoadLimits(ctx, api, "m5.xlarge", stateDir); err != nil {
		t.Fatalf("caching the facts as the agent does: %v", err)
	}
	// No EC2 from here on: the cached type and limits answer.
	t.Setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:1")
	var out bytes.Buffer
	if err := run([]string{"max-pods", "--state-dir", stateDir}, &out); err != nil {
		t.Fatalf("max-pods from the cache: %v", err)
	}
	if got := strings.TrimSpace(out.String()); got != "58" {
		t.Errorf("max-pods = %s, want 58 (m5.xlarge)", got)
	}
	if err := run([]string{"max-pods", "--state-dir", t.TempDir()}, &bytes.Buffer{}); err == nil {
		t.Error("no --instance-type and no cache: no error")
	}
}
