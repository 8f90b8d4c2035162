package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/agent"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// liveAgent runs a node controller against the simulator with its API on a unix socket, as the agent does,
// with one pod assigned, and returns the socket and the pod's assignment.
func liveAgent(t *testing.T) (string, *api.Assignment) {
	t.Helper()
	clk := clock.NewScaled(100)
	cfg := ec2sim.DefaultConfig()
	cfg.Clock = clk
	sim := ec2sim.New(cfg)
	if err := sim.AddVPC("vpc-1", "10.0.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if err := sim.AddSubnet(ec2sim.SubnetSpec{ID: "subnet-1", VPCID: "vpc-1", CIDR: "10.0.0.0/20", AZ: "us-west-2a"}); err != nil {
		t.Fatal(err)
	}
	inst, err := sim.AddInstance(ec2sim.InstanceSpec{Type: "m5.large", SubnetID: "subnet-1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := ec2sim.StartTest(t, sim)
	api0, err := ec2client.New(srv.EC2Client(t, func(o *ec2.Options) { o.Retryer = ec2client.NewSDKRetryer(3) }), ec2client.Config{Clock: clk}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	it, _ := ec2sim.LookupInstanceType(inst.Type)
	node, err := controller.New(controller.Config{StateDir: t.TempDir(), PoolInterval: time.Second, WarmIPTarget: 3},
		controller.Deps{EC2: api0, Clock: clk, Node: controller.NodeInfo{InstanceID: inst.ID, InstanceType: inst.Type,
			SubnetID: inst.SubnetID, SubnetCIDR: inst.SubnetCIDR, SecurityGroups: inst.SecurityGroups,
			MaxENIs: it.MaxENIs, IPv4PerENI: it.IPv4PerENI}})
	if err != nil {
		t.Fatal(err)
	}
	// Unix socket paths are short: under /tmp, with a name unique to this run.
	sockDir, err := os.MkdirTemp("", fmt.Sprintf("eniwirectl-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	l, err := agent.ListenSocket(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = node.Run(ctx); done <- struct{}{} }()
	go func() { _ = agent.Serve(ctx, l, agent.Handler(node, nil)); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; node.Close() })

	c := api.NewClient(sock)
	req := api.AssignRequest{Attachment: api.Attachment{ContainerID: "0123456789abcdef0123", IfName: "eth0"},
		Pod: api.PodIdentity{Namespace: "default", Name: "web"}, HostVeth: "eniw0123"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		a, err := c.Assign(context.Background(), req)
		if err == nil {
			return sock, a
		}
		if time.Now().After(deadline) {
			t.Fatalf("no IP from the agent: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStatusShowsTheLiveAgentsPool(t *testing.T) {
	sock, a := liveAgent(t)
	t.Run("the table shows the instance, the primary ENI and the pod", func(t *testing.T) {
		var out bytes.Buffer
		if err := run([]string{"status", "--socket", sock}, &out); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		for _, want := range []string{"ready: yes", "(m5.large)", "limits: 3 ENIs, 9 IPs per ENI", "1 assigned",
			"ENI  ", a.ENI, "POD", "default/web", "0123456789ab", a.IP, "eniw0123"} {
			if !strings.Contains(text, want) {
				t.Fatalf("status lacks %q:\n%s", want, text)
			}
		}
		var eniRow string
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, a.ENI) {
				eniRow = line
			}
		}
		if f := strings.Fields(eniRow); len(f) != 10 || f[1] != "0" || f[3] != "true" || f[7] != "1" {
			t.Fatalf("primary ENI row %q: want device 0, primary, 1 assigned", eniRow)
		}
	})
	t.Run("JSON carries the status and the assignments", func(t *testing.T) {
		var out bytes.Buffer
		if err := run([]string{"status", "--socket", sock, "--output", "json"}, &out); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Status      api.Status       `json:"status"`
			Assignments []api.Assignment `json:"assignments"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("decoding %s: %v", out.String(), err)
		}
		if !got.Status.Ready || got.Status.Assigned != 1 || len(got.Status.ENIs) == 0 || !got.Status.ENIs[0].Primary {
			t.Fatalf("status = %+v", got.Status)
		}
		if len(got.Assignments) != 1 || got.Assignments[0].IP != a.IP || got.Assignments[0].Pod.Name != "web" {
			t.Fatalf("assignments = %+v", got.Assignments)
		}
	})
	t.Run("a socket with no agent is an error", func(t *testing.T) {
		if err := run([]string{"status", "--socket", filepath.Join(t.TempDir(), "none.sock")}, &bytes.Buffer{}); err == nil {
			t.Fatal("status against a missing socket succeeded")
		}
	})
}
