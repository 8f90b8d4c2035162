package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/simworld"
)

// liveAgent runs a node controller against the simulator with its API on a unix socket, as the agent does,
// with one pod assigned, and returns the socket and the pod's assignment.
func liveAgent(t *testing.T) (string, *api.Assignment) {
	t.Helper()
	w := simworld.New(t, simworld.Options{Type: "m5.large", Factor: 100})
	sock, c := simworld.Serve(t, w.NewNode(t, controller.Config{PoolInterval: time.Second, WarmIPTarget: 3}))
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
		for _, want := range []string{"ready: yes", "(m5.large)", "limits: 3 ENIs, 9 IPs per ENI, 29 pods", "1 assigned",
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
		if f := strings.Fields(eniRow); len(f) != 11 || f[1] != "0" || f[3] != "true" || f[7] != "1" || f[10] != "-" {
			t.Fatalf("primary ENI row %q: want device 0, primary, 1 assigned, of no security group set", eniRow)
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

func TestStatusShowsPrefixModeAndItsFallback(t *testing.T) {
	s := &api.Status{Ready: true, InstanceID: "i-1", InstanceType: "m5.large", MaxENIs: 3, IPsPerENI: 9, MaxPods: 110,
		PrefixDelegation: true, PrefixFallback: "subnet subnet-1 has no free /28 (InsufficientCidrBlocks)",
		ENIs: []api.ENIStatus{{ID: "eni-1", Primary: true, State: "ready", IPs: []string{"10.0.1.16/28", "10.0.1.5"},
			IPCounts: api.IPCounts{Assigned: 4, Warm: 13},
			Prefixes: []api.PrefixStatus{{CIDR: "10.0.1.16/28", IPCounts: api.IPCounts{Assigned: 3, Warm: 12, Cooldown: 1}}}}}}
	var out bytes.Buffer
	if err := printStatus(&out, s, nil); err != nil {
		t.Fatal(err)
	}
	var prefixRow string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "  prefix ") {
			prefixRow = line
		}
	}
	if f := strings.Fields(prefixRow); !slices.Equal(f, []string{"prefix", "10.0.1.16/28", "16", "3", "12", "1"}) {
		t.Errorf("prefix row %q: want the prefix with 16 IPs, 3 assigned, 12 warm, 1 cooling down", prefixRow)
	}
	for _, want := range []string{"9 IPs per ENI, 110 pods", "prefix delegation: on", "prefix fallback: subnet subnet-1 has no free /28"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

func TestStatusShowsADatapathThatCanWireNoPod(t *testing.T) {
	for _, tc := range []struct {
		datapath string
		shown    bool
	}{{api.Healthy, false}, {"", false}, {"no ENI is up; bringing eni-1 up: no such device", true}} {
		s := &api.Status{Ready: true, InstanceID: "i-1", InstanceType: "m5.large", Journal: api.Healthy, Datapath: tc.datapath}
		var out bytes.Buffer
		if err := printStatus(&out, s, nil); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "datapath: "); got != tc.shown {
			t.Errorf("datapath %q: a datapath line shown %v, want %v:\n%s", tc.datapath, got, tc.shown, out.String())
		}
	}
}
