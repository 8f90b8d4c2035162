package eniconfig

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/subnet"
)

const nodeName = "ip-10-0-0-10.ec2.internal"

// startSource runs a source against the fake server with the default keys, or the ones given.
func startSource(t *testing.T, a *apiServer, k keys) *Source {
	t.Helper()
	s, err := New(Config{NodeName: nodeName, Label: k.label, Annotation: k.annotation, Kubeconfig: a.kubeconfig(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.Start(ctx)
	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if !s.WaitForSync(wait) {
		t.Fatalf("the watches did not sync: %v", s.Err())
	}
	return s
}

var defaultKeys = keys{label: DefaultLabel, annotation: DefaultAnnotation}

// eventually waits until the source's answer satisfies cond, failing after a deadline with the last answer.
func eventually(t *testing.T, s *Source, what string, cond func(c subnet.ENIConfig, ok bool, why string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, ok, why := s.Current()
		if cond(c, ok, why) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still Current() = %+v, %v, %q; Err() = %v", what, c, ok, why, s.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func uses(name, subnetID string) func(subnet.ENIConfig, bool, string) bool {
	return func(c subnet.ENIConfig, ok bool, _ string) bool {
		return ok && c.Name == name && c.Subnet == subnetID
	}
}

func TestTheNodesLabelChoosesItsENIConfigAndChangesAreSeen(t *testing.T) {
	a := newAPIServer(t)
	a.put("eniconfigs", "us-east-1a", eniConfig("subnet-a", "sg-1", "sg-2"))
	a.put("eniconfigs", "us-east-1b", eniConfig("subnet-b"))
	a.put("nodes", nodeName, node(map[string]any{DefaultLabel: "us-east-1a"}, nil))
	s := startSource(t, a, defaultKeys)

	eventually(t, s, "the labelled ENIConfig", uses("us-east-1a", "subnet-a"))
	if c, _, _ := s.Current(); !slices.Equal(c.SecurityGroups, []string{"sg-1", "sg-2"}) {
		t.Errorf("security groups %v, want [sg-1 sg-2]", c.SecurityGroups)
	}
	t.Run("a new label value picks another ENIConfig", func(t *testing.T) {
		a.put("nodes", nodeName, node(map[string]any{DefaultLabel: "us-east-1b"}, nil))
		eventually(t, s, "after relabelling", uses("us-east-1b", "subnet-b"))
	})
	t.Run("a changed spec.subnet is seen", func(t *testing.T) {
		a.put("eniconfigs", "us-east-1b", eniConfig("subnet-b2"))
		eventually(t, s, "after the spec changed", uses("us-east-1b", "subnet-b2"))
	})
	t.Run("a deleted ENIConfig no longer applies", func(t *testing.T) {
		a.remove("eniconfigs", "us-east-1b")
		eventually(t, s, "after the delete", func(_ subnet.ENIConfig, ok bool, why string) bool {
			return !ok && strings.Contains(why, "ENIConfig us-east-1b not found")
		})
	})
	if got := a.fieldSelector("nodes"); got != "metadata.name="+nodeName {
		t.Errorf("the node watch's field selector is %q: the agent must watch its own node only", got)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v with the server up", err)
	}
}

func TestTheAnnotationWinsOverTheLabel(t *testing.T) {
	a := newAPIServer(t)
	a.put("eniconfigs", "by-label", eniConfig("subnet-l"))
	a.put("eniconfigs", "by-annotation", eniConfig("subnet-n"))
	a.put("nodes", nodeName, node(map[string]any{DefaultLabel: "by-label"}, map[string]any{DefaultAnnotation: "by-annotation"}))
	s := startSource(t, a, defaultKeys)
	eventually(t, s, "the annotated ENIConfig", uses("by-annotation", "subnet-n"))

	a.put("nodes", nodeName, node(map[string]any{DefaultLabel: "by-label"}, nil))
	eventually(t, s, "once the annotation is gone, the label's", uses("by-label", "subnet-l"))
}

func TestAZoneLabelPicksTheENIConfigNamedAfterTheZone(t *testing.T) {
	a := newAPIServer(t)
	const zone = "topology.kubernetes.io/zone"
	a.put("eniconfigs", "us-east-1c", eniConfig("subnet-c"))
	a.put("nodes", nodeName, node(map[string]any{zone: "us-east-1c", DefaultLabel: "other"}, nil))
	s := startSource(t, a, keys{label: zone, annotation: DefaultAnnotation})
	eventually(t, s, "the zone's ENIConfig", uses("us-east-1c", "subnet-c"))
}

func TestWhenNoENIConfigAppliesCurrentSaysWhy(t *testing.T) {
	a := newAPIServer(t)
	a.put("nodes", nodeName, node(map[string]any{DefaultLabel: "us-east-1a"}, nil))
	s := startSource(t, a, defaultKeys)
	eventually(t, s, "a missing ENIConfig", func(_ subnet.ENIConfig, ok bool, why string) bool {
		return !ok && strings.Contains(why, "ENIConfig us-east-1a not found")
	})

	a.put("eniconfigs", "us-east-1a", map[string]any{"spec": map[string]any{"securityGroups": []any{"sg-1"}}})
	eventually(t, s, "an ENIConfig without a subnet", func(_ subnet.ENIConfig, ok bool, why string) bool {
		return !ok && strings.Contains(why, "ENIConfig us-east-1a: spec.subnet")
	})

	a.put("eniconfigs", "us-east-1a", eniConfig("subnet-a"))
	eventually(t, s, "once it is valid", uses("us-east-1a", "subnet-a"))

	a.put("nodes", nodeName, node(nil, nil))
	eventually(t, s, "a node without the label", func(_ subnet.ENIConfig, ok bool, why string) bool {
		return !ok && strings.Contains(why, "node has no label "+DefaultLabel)
	})
	a.put("eniconfigs", "default", eniConfig("subnet-d"))
	eventually(t, s, "a node without the label gets the ENIConfig named default", uses("default", "subnet-d"))
}

func TestTheLastValuesOutliveTheAPIServer(t *testing.T) {
	a := newAPIServer(t)
	a.put("eniconfigs", "us-east-1a", eniConfig("subnet-a"))
	a.put("nodes", nodeName, node(map[string]any{DefaultLabel: "us-east-1a"}, nil))
	s := startSource(t, a, defaultKeys)
	eventually(t, s, "before the server goes", uses("us-east-1a", "subnet-a"))

	a.stop()
	deadline := time.Now().Add(15 * time.Second)
	for s.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("Err() stayed nil after the API server went away")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("Err() = %v", s.Err())
	c, ok, why := s.Current()
	if !ok || c.Name != "us-east-1a" || c.Subnet != "subnet-a" {
		t.Errorf("with the server gone, Current() = %+v, %v, %q; want the last ENIConfig seen", c, ok, why)
	}
}

func TestANodeNotYetSeenSaysSo(t *testing.T) {
	a := newAPIServer(t)
	s := startSource(t, a, defaultKeys)
	if _, ok, why := s.Current(); ok || !strings.Contains(why, "node "+nodeName+" not seen") {
		t.Errorf("Current() = %v, %q", ok, why)
	}
}
