package podsg

import "testing"

// TestAPodWhoseSetGetsNoAddressIsToldOncePerReason: the controller's refusal of a pod's set (no ENI slot)
// is a Warning Event on the pod, once however often kubelet retries the ADD; another reason is another
// Event, and a pod that starts and comes back is told again.
func TestAPodWhoseSetGetsNoAddressIsToldOncePerReason(t *testing.T) {
	web := pod("shop", "web", "", map[string]string{"app": "web"})
	r := start(t, setup{}, web, account("shop", "default", nil),
		sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgA)))
	if _, _, err := r.ask("shop", "web", "uid-web"); err != nil {
		t.Fatal(err)
	}
	const noSlot = "security-group set " + sgA + ": no ENI slot for the set"
	for range 3 {
		r.w.Refused("shop", "web", "uid-web", noSlot)
		if _, _, err := r.ask("shop", "web", "uid-web"); err != nil { // kubelet's retry asks again
			t.Fatal(err)
		}
	}
	ev := r.events.next(t)
	if ev.on != "Pod shop/web" || ev.eventType != "Warning" || ev.reason != ReasonNoAddress || ev.message != noSlot {
		t.Fatalf("Event %s, want a Warning %s on Pod shop/web saying %q", ev, ReasonNoAddress, noSlot)
	}
	r.events.none(t)
	r.w.Refused("shop", "web", "uid-web", "EC2 refused an ENI with these groups")
	if ev := r.events.next(t); ev.reason != ReasonNoAddress {
		t.Fatalf("Event %s, want another %s for another reason", ev, ReasonNoAddress)
	}
	r.w.Started("shop", "web", "uid-web", []string{sgA})
	r.w.Stopped("shop", "web", "uid-web")
	r.w.Refused("shop", "web", "uid-web", noSlot)
	if ev := r.events.next(t); ev.message != noSlot {
		t.Fatalf("Event %s after the pod started and went, want %q again", ev, noSlot)
	}
}
