package podsg

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestAMalformedPolicyIsIgnoredWholeAndReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy map[string]any
		says   string
	}{
		{"a bad group id", policySpec(map[string]string{"app": "web"}, nil, sgB, "sg-12345"), `"sg-12345": not security group ids`},
		{"no groups", policySpec(map[string]string{"app": "web"}, nil), "spec.securityGroups.groupIds is empty"},
		{"no selector", policySpec(nil, nil, sgB), "neither spec.podSelector nor spec.serviceAccountSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, setup{},
				pod("shop", "web", "", map[string]string{"app": "web"}), account("shop", "default", nil),
				sgp("shop", "good", policySpec(map[string]string{"app": "web"}, nil, sgA)),
				sgp("shop", "bad", tc.policy))
			r.check(t, answers{"shop/web": {[]string{sgA}, []string{"shop/good"}}})

			ev := r.events.next(t)
			if ev.on != "SecurityGroupPolicy shop/bad" || ev.eventType != "Warning" || ev.reason != ReasonInvalidPolicy {
				t.Fatalf("Event %s, want a Warning %s on SecurityGroupPolicy shop/bad", ev, ReasonInvalidPolicy)
			}
			contains(t, "the Event", ev.message, "ignored, selecting no pod", tc.says)
			contains(t, "the status", r.w.Status(), "2 SecurityGroupPolicies (1 ignored)", "policy shop/bad ignored: ", tc.says)
			contains(t, "the log", r.logs.String(), "SecurityGroupPolicy ignored", "shop/bad")

			// The same mistake again (the policy relabelled) is not told twice: the next Event is the next
			// mistake's.
			again := sgp("shop", "bad", tc.policy)
			again.SetLabels(map[string]string{"touched": "yes"})
			r.put(t, again)
			r.put(t, sgp("shop", "bad", policySpec(map[string]string{"app": "web"}, nil, "sg-other")))
			contains(t, "the next Event", r.events.next(t).message, `"sg-other"`)
			r.events.none(t)
		})
	}
}

func TestAMalformedPolicyOfANamespaceWithoutPodsHereIsNoEventFromThisNode(t *testing.T) {
	r := start(t, setup{}, sgp("blog", "bad", policySpec(map[string]string{}, nil, "web")))
	contains(t, "the status", r.w.Status(), "policy blog/bad ignored")
	r.events.none(t)
}

func TestPoliciesGivingAPodMoreGroupsThanAnENICarriesFailItsADD(t *testing.T) {
	r := start(t, setup{},
		pod("shop", "web", "", map[string]string{"app": "web"}), account("shop", "default", nil),
		sgp("shop", "front", policySpec(map[string]string{"app": "web"}, nil, group(1), group(2), group(3))),
		sgp("shop", "back", policySpec(map[string]string{}, nil, group(3), group(4), group(5), group(6))))
	groups, policies, err := r.ask("shop", "web", "uid-web")
	if !errors.Is(err, ErrTooManyGroups) {
		t.Fatalf("answer %v %v %v, want ErrTooManyGroups", groups, policies, err)
	}
	if groups != nil || policies != nil {
		t.Errorf("a refused answer gives groups %v from %v", groups, policies)
	}
	want := []string{"pod shop/web", "SecurityGroupPolicies shop/back, shop/front", "6 security groups", "more than the 5 an ENI may carry"}
	for i := 1; i <= 6; i++ {
		want = append(want, group(i))
	}
	contains(t, "the error", err.Error(), want...)

	var on []string
	for range 2 {
		ev := r.events.next(t)
		if ev.reason != ReasonTooManyGroups || ev.eventType != "Warning" {
			t.Errorf("Event %s, want a Warning %s", ev, ReasonTooManyGroups)
		}
		contains(t, "the Event", ev.message, "node "+node+" refuses its pod", "more than the 5")
		on = append(on, ev.on)
	}
	slices.Sort(on)
	if !slices.Equal(on, []string{"SecurityGroupPolicy shop/back", "SecurityGroupPolicy shop/front"}) {
		t.Errorf("Events on %v, want one on each policy", on)
	}
	contains(t, "the status", r.w.Status(), "shop/web refused: ", "more than the 5")

	t.Run("the runtime's retry is refused again, without more Events", func(t *testing.T) {
		if _, _, err := r.ask("shop", "web", "uid-web"); !errors.Is(err, ErrTooManyGroups) {
			t.Fatalf("retry: %v", err)
		}
		r.events.none(t)
	})
	t.Run("once a policy changes so the set fits, the ADD goes on and the refusal is gone", func(t *testing.T) {
		r.put(t, sgp("shop", "back", policySpec(map[string]string{}, nil, group(3), group(4))))
		groups, _, err := r.ask("shop", "web", "uid-web")
		if err != nil || len(groups) != 4 {
			t.Fatalf("answer %v %v, want 4 groups", groups, err)
		}
		if s := r.w.Status(); strings.Contains(s, "refused") {
			t.Errorf("status %q still tells the refusal", s)
		}
	})
}

func TestAnAccountWithARaisedQuotaSetsMaxGroupsPerENI(t *testing.T) {
	r := start(t, setup{cfg: func(c *Config) { c.MaxGroupsPerENI = 6 }},
		pod("shop", "web", "", map[string]string{"app": "web"}), account("shop", "default", nil),
		sgp("shop", "six", policySpec(map[string]string{}, nil, group(1), group(2), group(3), group(4), group(5), group(6))))
	if groups, _, err := r.ask("shop", "web", "uid-web"); err != nil || len(groups) != 6 {
		t.Fatalf("answer %v %v, want the 6 groups", groups, err)
	}
}
