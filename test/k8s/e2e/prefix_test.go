package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// prefixDelegation installs eniwire again with ENABLE_PREFIX_DELEGATION=true, restarts node 2's kubelet (an
// m5.large) with the max pods eniwire computes for prefixes (110, as `eniwirectl max-pods --prefix-delegation`
// prints), and fills the node to 110 pods: every pod Running, with an address EC2 lists on one of the node's
// ENIs (inside a /28 prefix or as a secondary IP), no address twice, and the books equal to EC2.
func (s *suite) prefixDelegation(t *testing.T) string {
	ctx := context.Background()
	n := s.node2
	if err := s.c.InstallEniwire(ctx, "k8s-test"); err != nil {
		t.Fatal(err)
	}
	s.setAgentEnv(t, "ENABLE_PREFIX_DELEGATION=true")
	maxPods, err := cluster.MaxPods(n.Instance.Type, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.RestartKubelet(n, maxPods); err != nil {
		t.Fatal(err)
	}
	if err := s.waitAllocatablePods(ctx, n, maxPods); err != nil {
		t.Fatal(err)
	}
	if err := s.c.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	held, err := s.podsOn(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	replicas := maxPods - held
	start := time.Now()
	mustCreate(t, "dense", s.c.Client.AppsV1().Deployments(ns).Create, deployment("dense", n.Name, int32(replicas)))
	pods, err := waitPodsReady(ctx, s.c, ns, "app=dense", replicas, 6*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	checkPodAddresses(t, s.c, n, pods)
	if err := s.checkNoIPTwice(ctx); err != nil {
		t.Error(err)
	}
	enis, err := s.checkBooks(ctx)
	if err != nil {
		t.Error(err)
	}
	prefixes, inPrefix := prefixUse(s.c, n, pods)
	if prefixes == 0 || inPrefix == 0 {
		t.Errorf("node %s holds %d prefixes and %d of the pods have an address in one", short(n.Name), prefixes, inPrefix)
	}
	s.deleteWorkloads(t)
	return fmt.Sprintf("%s (%s, --max-pods %d): %d pods of a Deployment + %d others Running in %.0fs; %d in %d /28 prefixes; ENIs %s, books = EC2",
		short(n.Name), n.Instance.Type, maxPods, replicas, held, took.Seconds(), inPrefix, prefixes, enis)
}

// waitAllocatablePods waits until the node reports want allocatable pods (its kubelet restarted with them).
func (s *suite) waitAllocatablePods(ctx context.Context, n *cluster.Node, want int) error {
	var got string
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		node, err := s.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			q := node.Status.Allocatable[corev1.ResourcePods]
			if got = q.String(); got == strconv.Itoa(want) {
				return nil
			}
		}
	}
	return fmt.Errorf("node %s reports %s allocatable pods after its kubelet restart, want %d", n.Name, got, want)
}

// prefixUse counts the /28 prefixes EC2 lists on n's ENIs and the pods whose address is in one of them.
func prefixUse(c *cluster.Cluster, n *cluster.Node, pods []corev1.Pod) (prefixes, inPrefix int) {
	var held []netip.Prefix
	for _, e := range c.Sim.Snapshot().ENIs {
		if e.Attachment == nil || e.Attachment.InstanceID != n.Instance.ID {
			continue
		}
		for _, p := range e.Prefixes {
			if pfx, err := netip.ParsePrefix(p); err == nil {
				held = append(held, pfx)
			}
		}
	}
	for _, p := range pods {
		addr, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			continue
		}
		for _, pfx := range held {
			if pfx.Contains(addr) {
				inPrefix++
				break
			}
		}
	}
	return len(held), inPrefix
}
