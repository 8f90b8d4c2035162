package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// endpoints starts run() with args and returns the EC2, admin and first IMDS endpoints it printed.
func startEC2Sim(t *testing.T, args ...string) (ec2URL, adminURL, imdsURL string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, io.Discard)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ec2sim: %v", err)
		}
	})
	re := regexp.MustCompile(`^(EC2|Admin|IMDS) endpoint:\s+(\S+)`)
	sc := bufio.NewScanner(pr)
	for sc.Scan() && (ec2URL == "" || adminURL == "" || imdsURL == "") {
		m := re.FindStringSubmatch(sc.Text())
		switch {
		case m == nil:
		case m[1] == "EC2":
			ec2URL = m[2]
		case m[1] == "Admin":
			adminURL = m[2]
		case imdsURL == "":
			imdsURL = m[2]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if ec2URL == "" || adminURL == "" || imdsURL == "" {
		t.Fatalf("endpoints not printed: %q %q %q", ec2URL, adminURL, imdsURL)
	}
	return ec2URL, adminURL, imdsURL
}

// awsCLI runs the AWS CLI against the simulator with dummy credentials and returns stdout, stderr and
// the exit code.
func awsCLI(t *testing.T, endpoint string, args ...string) (string, string, int) {
	t.Helper()
	bin := testenv.RequireTool(t, "aws")
	home := t.TempDir()
	full := []string{"--endpoint-url", endpoint, "--output", "json"}
	// --no-cli-pager exists from CLI v2 on; v1 has no pager.
	if v, _ := exec.Command(bin, "--version").CombinedOutput(); strings.HasPrefix(string(v), "aws-cli/2") {
		full = append(full, "--no-cli-pager")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(full, args...)...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+ec2sim.TestAccessKey, "AWS_SECRET_ACCESS_KEY="+ec2sim.TestSecretKey,
		"AWS_DEFAULT_REGION=us-west-2", "AWS_PAGER=", "HOME="+home, "AWS_CONFIG_FILE="+filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "credentials"), "AWS_MAX_ATTEMPTS=1", "AWS_EC2_METADATA_DISABLED=true")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running aws: %v", err)
	}
	return stdout.String(), stderr.String(), code
}

func mustCLI(t *testing.T, endpoint string, v any, args ...string) {
	t.Helper()
	out, errOut, code := awsCLI(t, endpoint, args...)
	if code != 0 {
		t.Fatalf("aws %v: exit %d: %s", args, code, errOut)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("aws %v: decoding %q: %v", args, out, err)
		}
	}
}

func TestTheAWSCLIManagesAnENIOnTheDefaultSimulator(t *testing.T) {
	testenv.RequireTool(t, "aws")
	ec2URL, _, _ := startEC2Sim(t)

	var subnets struct {
		Subnets []struct {
			SubnetId                string
			CidrBlock               string
			AvailableIpAddressCount int
		}
	}
	mustCLI(t, ec2URL, &subnets, "ec2", "describe-subnets")
	if len(subnets.Subnets) != 2 || subnets.Subnets[0].AvailableIpAddressCount != 8192-5-1 || subnets.Subnets[1].AvailableIpAddressCount != 8192-5 {
		t.Fatalf("subnets = %+v", subnets)
	}

	var created struct {
		NetworkInterface struct {
			NetworkInterfaceId string
			PrivateIpAddresses []struct{ PrivateIpAddress string }
			TagSet             []struct{ Key, Value string }
		}
	}
	mustCLI(t, ec2URL, &created, "ec2", "create-network-interface", "--subnet-id", subnets.Subnets[0].SubnetId,
		"--description", "made by the aws cli", "--secondary-private-ip-address-count", "2",
		"--tag-specifications", "ResourceType=network-interface,Tags=[{Key=team,Value=blue},{Key=env,Value=test}]")
	id := created.NetworkInterface.NetworkInterfaceId
	if id == "" || len(created.NetworkInterface.PrivateIpAddresses) != 3 || len(created.NetworkInterface.TagSet) != 2 {
		t.Fatalf("created = %+v", created)
	}

	var described struct {
		NetworkInterfaces []struct {
			NetworkInterfaceId string
			Description        string
			Status             string
		}
	}
	mustCLI(t, ec2URL, &described, "ec2", "describe-network-interfaces", "--filters", "Name=tag:team,Values=blue")
	if len(described.NetworkInterfaces) != 1 || described.NetworkInterfaces[0].NetworkInterfaceId != id ||
		described.NetworkInterfaces[0].Description != "made by the aws cli" || described.NetworkInterfaces[0].Status != "available" {
		t.Fatalf("described = %+v", described)
	}

	mustCLI(t, ec2URL, nil, "ec2", "delete-network-interface", "--network-interface-id", id)
	_, errOut, code := awsCLI(t, ec2URL, "ec2", "describe-network-interfaces", "--network-interface-ids", id)
	if code == 0 || !strings.Contains(errOut, "InvalidNetworkInterfaceID.NotFound") || !strings.Contains(errOut, "The networkInterface ID '"+id+"' does not exist") {
		t.Fatalf("after delete: exit %d, stderr %q", code, errOut)
	}
}

func TestFlagsSeedStateThrottlingAndSpeedUp(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.json")
	if err := os.WriteFile(seed, []byte(`{
		"vpcs": [{"id": "vpc-0seed", "cidr": "172.16.0.0/16"}],
		"subnets": [{"id": "subnet-0seed", "vpcId": "vpc-0seed", "cidr": "172.16.1.0/24", "az": "us-west-2c"}],
		"instances": [{"id": "i-0123456789abcdef0", "type": "c5.18xlarge", "subnetId": "subnet-0seed"}]
	}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, adminURL, _ := startEC2Sim(t, "-state", seed, "-throttling=false", "-speedup", "50", "-attach-delay", "5s")
	st := adminState(t, adminURL)
	if st.Throttling || len(st.Instances) != 1 || st.Instances[0].Type != "c5.18xlarge" || st.Subnets[0].Available != 256-5-1 {
		t.Fatalf("state = %+v", st)
	}
	var bad strings.Builder
	if err := run(context.Background(), []string{"-speedup", "0"}, io.Discard, &bad); err == nil {
		t.Fatal("a zero speed-up was accepted")
	}
}

func TestTheDualStackFlagSeedsIPv6Blocks(t *testing.T) {
	_, adminURL, _ := startEC2Sim(t, "-dual-stack")
	st := adminState(t, adminURL)
	if len(st.VPCs) != 1 || len(st.VPCs[0].IPv6CIDRBlocks) != 1 || st.VPCs[0].IPv6CIDRBlocks[0] != ec2sim.DualStackVPCIPv6 ||
		st.Subnets[0].IPv6CIDR != ec2sim.DualStackSubnetAIPv6 || st.Subnets[1].IPv6CIDR != ec2sim.DualStackSubnetBIPv6 {
		t.Fatalf("state = %+v", st)
	}
	if err := run(context.Background(), []string{"-dual-stack", "-pod-subnets"}, io.Discard, io.Discard); err == nil {
		t.Fatal("two seeds at once were accepted")
	}
}

// adminState reads the simulator's whole state from its admin endpoint.
func adminState(t *testing.T, adminURL string) ec2sim.State {
	t.Helper()
	resp, err := httpGet(adminURL + "/state")
	if err != nil {
		t.Fatal(err)
	}
	var st ec2sim.State
	if err := json.Unmarshal(resp, &st); err != nil {
		t.Fatal(err)
	}
	return st
}
