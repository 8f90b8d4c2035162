package policywatch

import (
	"strings"
	"testing"
)

// TestADeniedFlowIsLoggedWithThePodThePeerThePortAndThePolicies: a denial the datapath reports names the
// pod, the peer, the port and the policies that isolate the pod.
func TestADeniedFlowIsLoggedWithThePodThePeerThePortAndThePolicies(t *testing.T) {
	s := start(t, newFakeDriver(),
		namespace("shop", nil),
		pod("shop", "web", node, "10.0.1.10", map[string]string{"app": "web"}),
		policy("shop", "deny", "web", "", 0),
	)
	s.w.LogDenial(Denial{Pod: addr("10.0.1.10"), Peer: addr("10.0.2.20"), Protocol: 6, Port: 8080})
	want := `msg="policy denied a new flow" component=networkpolicy pod=shop/web pod_ip=10.0.1.10 direction=ingress from=10.0.2.20 to=10.0.1.10 port=tcp/8080 policies=[shop/deny]`
	if !strings.Contains(s.logs.String(), want) {
		t.Errorf("logged %q, want %q", s.logs.String(), want)
	}
}
