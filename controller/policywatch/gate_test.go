package policywatch

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/controller/api"
)

// TestAnADDUnderADenyPolicyAnswersOnlyOnceItsStateIsWritten: the ADD of a pod under a deny policy comes
// before the watch has seen the pod. The gate must not let the pod up until the watch reports it and its
// state, compiled at the ADD's address (status.podIPs is still empty), is written isolated. kubelet's later
// status updates, first without an address, then naming it, must not clear it.
func TestAnADDUnderADenyPolicyAnswersOnlyOnceItsStateIsWritten(t *testing.T) {
	d := newFakeDriver()
	s := start(t, d, namespace("shop", nil), policy("shop", "deny", "web", "", 0))
	ip := addr("10.0.1.11")
	id := api.PodIdentity{Namespace: "shop", Name: "web", UID: "uid-web"}

	gated := make(chan error, 1)
	go func() { gated <- s.w.BeforePodUp(context.Background(), id, ip) }()
	select {
	case err := <-gated:
		t.Fatalf("the gate let the pod up (%v) before the watch saw it", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, ok := d.get(ip); ok {
		t.Fatal("state written before the pod was seen")
	}
	ctx := context.Background()
	p := pod("shop", "web", node, "", map[string]string{"app": "web"})
	p.Status.Phase = corev1.PodPending
	if _, err := s.client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-gated; err != nil {
		t.Fatalf("gate: %v", err)
	}
	// The gate has returned: the state must be in the driver already, not eventually.
	if st, ok := d.get(ip); !ok || !st.IngressIsolated || len(st.Ingress) != 0 {
		t.Fatalf("when the gate returned, the pod's state was %s (%v), want isolated, nothing allowed", describe(st), ok)
	}

	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	if _, err := s.client.CoreV1().Pods("shop").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Status.PodIP, p.Status.PodIPs, p.Status.Phase = ip.String(), []corev1.PodIP{{IP: ip.String()}}, corev1.PodRunning
	if _, err := s.client.CoreV1().Pods("shop").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "the watch to see the pod running", func() bool {
		r, err := s.w.PolicyReport(ctx, "shop/web", "")
		return err == nil && len(r.Addresses) == 1
	})
	time.Sleep(50 * time.Millisecond) // let any late handler run: the assertion is that nothing cleared the state
	if n := d.count("clear " + ip.String()); n != 0 {
		t.Errorf("kubelet's status updates cleared the pod's state %d times", n)
	}
	if st, _ := d.get(ip); !st.IngressIsolated {
		t.Errorf("after kubelet's updates: %s, want still isolated", describe(st))
	}
}

// TestAnADDWhosePodNeverAppearsFails: without the pod in the watch within PodWait the ADD fails, naming the
// pod, and nothing is written.
func TestAnADDWhosePodNeverAppearsFails(t *testing.T) {
	d := newFakeDriver()
	s := start(t, d, namespace("shop", nil))
	s.w.cfg.PodWait = 50 * time.Millisecond
	err := s.w.BeforePodUp(context.Background(), api.PodIdentity{Namespace: "shop", Name: "ghost", UID: "u"}, addr("10.0.1.12"))
	if err == nil || !strings.Contains(err.Error(), "pod shop/ghost (uid u) not in the watch") {
		t.Fatalf("gate: %v, want the pod named as not in the watch", err)
	}
	if _, ok := d.get(addr("10.0.1.12")); ok {
		t.Error("state written for a pod never seen")
	}
	// A runtime's container that is no Kubernetes pod passes at once.
	if err := s.w.BeforePodUp(context.Background(), api.PodIdentity{}, addr("10.0.1.13")); err != nil {
		t.Errorf("gate of a nameless pod: %v", err)
	}
}

// TestAPodWhoseSandboxIsMadeAgainTakesItsNewAddressAtOnce: a running pod's sandbox is made again (a new
// ADD, a new address) while status.podIPs still names the old one. The new address must get the pod's
// state when the gate returns, and the old one lose it, before kubelet writes the new address.
func TestAPodWhoseSandboxIsMadeAgainTakesItsNewAddressAtOnce(t *testing.T) {
	d := newFakeDriver()
	s := start(t, d, namespace("shop", nil), policy("shop", "deny", "web", "", 0),
		pod("shop", "web", node, "10.0.1.10", map[string]string{"app": "web"}))
	id := api.PodIdentity{Namespace: "shop", Name: "web", UID: "uid-web"}
	if err := s.w.BeforePodUp(context.Background(), id, addr("10.0.1.44")); err != nil {
		t.Fatal(err)
	}
	if st, ok := d.get(addr("10.0.1.44")); !ok || !st.IngressIsolated {
		t.Errorf("the new address has %s (%v), want isolated", describe(st), ok)
	}
	if _, ok := d.get(addr("10.0.1.10")); ok {
		t.Error("the old address kept the pod's state")
	}
}

// TestADualStackPodTakesItsStateAtBothAddressesAtOnce: the ADD of a dual-stack pod under a deny policy gives
// the gate its IPv4 and its IPv6 address. When the gate returns, both must hold the pod's isolated state,
// before kubelet writes status.podIPs; once it names only the IPv4 (a status written in between), the IPv6
// keeps the state too.
func TestADualStackPodTakesItsStateAtBothAddressesAtOnce(t *testing.T) {
	d := newFakeDriver()
	s := start(t, d, namespace("shop", nil), policy("shop", "deny", "web", "", 0),
		pod("shop", "web", node, "", map[string]string{"app": "web"}))
	v4, v6 := addr("10.0.1.21"), addr("2600:1f14:e1a:e101:a::21")
	id := api.PodIdentity{Namespace: "shop", Name: "web", UID: "uid-web"}
	if err := s.w.BeforePodUp(context.Background(), id, v4, v6); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []netip.Addr{v4, v6} {
		if st, ok := d.get(ip); !ok || !st.IngressIsolated || len(st.Ingress) != 0 {
			t.Errorf("when the gate returned, %s had %s (%v), want isolated, nothing allowed", ip, describe(st), ok)
		}
	}
	ctx := context.Background()
	p, err := s.client.CoreV1().Pods("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.PodIP, p.Status.PodIPs = v4.String(), []corev1.PodIP{{IP: v4.String()}}
	if _, err := s.client.CoreV1().Pods("shop").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "the watch to see the pod's IPv4", func() bool {
		r, err := s.w.PolicyReport(ctx, "shop/web", "")
		return err == nil && len(r.Addresses) == 2
	})
	if st, ok := d.get(v6); !ok || !st.IngressIsolated {
		t.Errorf("with status.podIPs naming the IPv4 alone, %s has %s (%v), want still isolated", v6, describe(st), ok)
	}
}

// TestAnADDAtAnAddressWhoseStateTheDatapathClearedWritesItAgain: an ADD that failed after the agent answered
// gives its address back, and the datapath's teardown clears the address's policy state without the
// compiler knowing. The retried ADD gets the same address at once, and the compiler sees nothing new: the
// gate must write the pod's compiled state anyway, or the pod comes up open.
func TestAnADDAtAnAddressWhoseStateTheDatapathClearedWritesItAgain(t *testing.T) {
	d := newFakeDriver()
	p := pod("shop", "web", node, "", map[string]string{"app": "web"})
	p.UID = "uid-web"
	s := start(t, d, namespace("shop", nil), policy("shop", "deny", "web", "", 0), p)
	ip := addr("10.0.1.11")
	id := api.PodIdentity{Namespace: "shop", Name: "web", UID: "uid-web"}
	for try := 1; try <= 2; try++ {
		if err := s.w.BeforePodUp(context.Background(), id, ip); err != nil {
			t.Fatalf("gate, ADD %d: %v", try, err)
		}
		if st, ok := d.get(ip); !ok || !st.IngressIsolated {
			t.Fatalf("after ADD %d's gate the pod's state was %s (written: %v), want isolated", try, describe(st), ok)
		}
		// The failed ADD's release: the datapath's PodDown clears the address's state.
		if err := d.ClearPodPolicy(context.Background(), ip); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAForceDeletedPodKeepsItsStateUntilItsDEL: a pod force-deleted from the API runs on until the runtime's
// DEL tears its sandbox down. The watch's delete must not clear its policy state: the pod would run open
// meanwhile. The DEL's teardown clears it (the datapath's PodDown).
func TestAForceDeletedPodKeepsItsStateUntilItsDEL(t *testing.T) {
	d := newFakeDriver()
	web := addr("10.0.1.11")
	s := start(t, d, namespace("shop", nil), policy("shop", "deny", "web", "", 0), pod("shop", "web", node, web.String(), map[string]string{"app": "web"}))
	d.waitFor(t, "web isolated", func() bool { p, _ := d.get(web); return p.IngressIsolated })
	if err := s.client.CoreV1().Pods("shop").Delete(context.Background(), "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.w.mu.Lock()
		_, known := s.w.local[podKey{"shop", "web"}]
		s.w.mu.Unlock()
		if !known {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch never saw the pod's delete")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p, ok := d.get(web); !ok || !p.IngressIsolated {
		t.Errorf("after the pod's delete, before its DEL, its address's state is %s (written: %v), want still isolated", describe(p), ok)
	}
	if n := d.count("clear " + web.String()); n != 0 {
		t.Errorf("the watch cleared the deleted pod's address %d times; its DEL's teardown does", n)
	}
}
