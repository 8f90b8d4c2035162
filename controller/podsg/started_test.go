package podsg

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAPolicyChangedAfterAPodStartedIsReportedOnThePodOncePerChange: the pod keeps the groups it started
// with; each change of what the policies give it is one Warning Event on it, and nothing that leaves the
// answer as it is (an edit of the policy's metadata, the pod relabelled alike) writes another.
func TestAPolicyChangedAfterAPodStartedIsReportedOnThePodOncePerChange(t *testing.T) {
	web := pod("shop", "web", "", map[string]string{"app": "web"})
	r := start(t, setup{}, web, account("shop", "default", nil),
		sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgA)))
	groups, _, err := r.ask("shop", "web", "uid-web")
	if err != nil {
		t.Fatal(err)
	}
	r.w.Started("shop", "web", "uid-web", groups)
	r.events.none(t)

	r.put(t, sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgB)))
	ev := r.events.next(t)
	if ev.on != "Pod shop/web" || ev.eventType != "Warning" || ev.reason != ReasonGroupsChanged {
		t.Fatalf("Event %s, want a Warning %s on Pod shop/web", ev, ReasonGroupsChanged)
	}
	contains(t, "the Event", ev.message, "its security groups stay ["+sgA+"] until it is recreated",
		"a new pod would get ["+sgB+"] from SecurityGroupPolicies shop/web")
	contains(t, "the status", r.w.Status(), "shop/web keeps ["+sgA+"] until recreated, would get ["+sgB+"]")

	// Changes that leave the answer as it is: none may write an Event.
	same := sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgB))
	same.SetAnnotations(map[string]string{"edited": "yes"})
	r.put(t, same)
	web.Labels["tier"] = "front"
	if _, err := r.client.CoreV1().Pods("shop").Update(context.Background(), web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Back to what the pod has: no Event, and the difference is no longer reported.
	r.put(t, sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgA)))
	r.waitFor(t, "the status to drop the difference", func() bool { return !strings.Contains(r.w.Status(), "keeps") })

	// The next Event must be the next change's: none came in between.
	r.put(t, sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgA, sgC)))
	ev = r.events.next(t)
	contains(t, "the Event after the second change", ev.message, "would get ["+sgA+" "+sgC+"]")
	r.events.none(t)

	t.Run("a deleted policy is a change too", func(t *testing.T) {
		if err := r.dyn.Resource(securityGroupPolicies).Namespace("shop").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := r.events.next(t)
		contains(t, "the Event", ev.message, "stay ["+sgA+"]", "would get none of its own: no SecurityGroupPolicy selects it")
	})
	t.Run("a stopped pod is no longer reported", func(t *testing.T) {
		r.w.Stopped("shop", "web", "uid-web")
		r.put(t, sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgB)))
		r.events.none(t)
		contains(t, "the status", r.w.Status(), "0 running pods")
	})
}

// TestPodsStartedBeforeTheFirstListsAreComparedOnceTheyAreIn: after a restart the controller tells the
// watcher its books' pods before the lists are in; a policy changed while the agent was down is reported.
func TestPodsStartedBeforeTheFirstListsAreComparedOnceTheyAreIn(t *testing.T) {
	// The pod ran with sgA before the restart; its policy gives sgB now, and another pod has what it should.
	books := func(w *Watcher) {
		w.Started("shop", "web", "uid-web", []string{sgA})
		w.Started("shop", "api", "uid-api", nil)
	}
	r := start(t, setup{beforeRun: books},
		pod("shop", "web", "", map[string]string{"app": "web"}), pod("shop", "api", "", nil), account("shop", "default", nil),
		sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgB)))
	ev := r.events.next(t)
	if ev.on != "Pod shop/web" {
		t.Errorf("Event on %s, want Pod shop/web", ev.on)
	}
	contains(t, "the Event", ev.message, "stay ["+sgA+"]", "would get ["+sgB+"]")
	r.events.none(t)
}

func TestAPodWithAnotherUIDThanTheStartedOneIsNotCompared(t *testing.T) {
	r := start(t, setup{},
		pod("shop", "web", "", map[string]string{"app": "web"}), account("shop", "default", nil),
		sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgB)))
	// The books' pod is an older one of the name; the watch's is the new one.
	r.w.Started("shop", "web", "uid-web-old", []string{sgA})
	r.put(t, sgp("shop", "web", policySpec(map[string]string{"app": "web"}, nil, sgC)))
	r.events.none(t)
}
