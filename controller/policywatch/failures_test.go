package policywatch

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// TestAStateThatDoesNotFitIsAnEventAStatusLineAndAMetric: the datapath refuses web's state (it does not
// fit, so the pod allows nothing). The policy that selects web gets a Warning Event, the status names the
// pod, the gauge counts it; db's state is written as usual. Once the refusal ends, all three clear.
func TestAStateThatDoesNotFitIsAnEventAStatusLineAndAMetric(t *testing.T) {
	d := newFakeDriver()
	refuse := true
	d.fail = func(a netip.Addr, _ dptypes.PodPolicy) error {
		if refuse && a == addr("10.0.1.10") {
			return errors.New("pod policy does not fit: 100000 entries: no space left on device")
		}
		return nil
	}
	s := start(t, d,
		namespace("shop", nil),
		pod("shop", "web", node, "10.0.1.10", map[string]string{"app": "web"}),
		pod("shop", "db", node, "10.0.1.20", map[string]string{"app": "db"}),
		policy("shop", "huge", "web", "", 0),
		policy("shop", "deny-db", "db", "", 0),
	)
	select {
	case e := <-s.events.Events:
		want := "Warning PolicyNotEnforceable pod shop/web (10.0.1.10) on node node-a: its policy could not be written, so it allows nothing"
		if !strings.HasPrefix(e, want) {
			t.Errorf("event %q, want it to start %q", e, want)
		}
	default:
		t.Fatal("no Event for the refused state")
	}
	st := s.w.Status()
	if !strings.Contains(st, "policy of 10.0.1.10 (shop/web) not written, allowing nothing (policies shop/huge)") {
		t.Errorf("status %q does not name the refused pod", st)
	}
	if v := testutil.ToFloat64(s.w.metrics.failed); v != 1 {
		t.Errorf("eniwire_policy_failed_pods %v, want 1", v)
	}
	if p, _ := d.get(addr("10.0.1.20")); !p.IngressIsolated {
		t.Errorf("db's state %s: the refusal of web's changed another pod", describe(p))
	}
	r, err := s.w.PolicyReport(context.Background(), "shop/web", "from 10.0.1.20 tcp/80")
	if err != nil {
		t.Fatal(err)
	}
	if r.Failure == "" || r.Explanation.Allowed || !strings.Contains(r.Explanation.Reason, "could not be written") {
		t.Errorf("report %+v / %+v: want the failure and a denial naming it", r, r.Explanation)
	}

	s.w.mu.Lock()
	refuse = false
	s.w.apply([]netip.Addr{addr("10.0.1.10")})
	s.w.mu.Unlock()
	if v := testutil.ToFloat64(s.w.metrics.failed); v != 0 {
		t.Errorf("eniwire_policy_failed_pods %v after the state was written, want 0", v)
	}
	if st := s.w.Status(); strings.Contains(st, "not written") {
		t.Errorf("status %q still names a failure", st)
	}
}
