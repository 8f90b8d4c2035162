package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/simworld"
)

// TestAPodBeyondMaxPodsIsToldMaxPodsReached: with MAX_PODS=5 the pool holds 5 IPs; a sixth pod is not told
// that capacity is on its way (it never is): the answer and the status say max pods is reached, with the
// numbers.
func TestAPodBeyondMaxPodsIsToldMaxPodsReached(t *testing.T) {
	w := simworld.New(t, simworld.Options{Type: "m5.4xlarge", Factor: 200})
	node := w.NewNode(t, controller.Config{StateDir: t.TempDir(), PoolInterval: time.Second, WarmIPTarget: 20, MaxPods: 5})
	_, client := simworld.Serve(t, node)
	simworld.WaitStatus(t, client, "ready with the pool at max pods", func(st *api.Status) bool { return st.Ready && st.Warm >= 5 })
	ctx := context.Background()
	assign := func(i int) (*api.Assignment, error) {
		return client.Assign(ctx, api.AssignRequest{Attachment: api.Attachment{ContainerID: fmt.Sprintf("c%d", i), IfName: "eth0"},
			Netns: "/var/run/netns/x", Pod: api.PodIdentity{Namespace: "default", Name: fmt.Sprintf("p%d", i), UID: "u"}})
	}
	for i := range 5 {
		if _, err := assign(i); err != nil {
			t.Fatalf("pod %d of 5: %v", i, err)
		}
	}
	_, err := assign(5)
	var ae *api.Error
	if err == nil || !errors.As(err, &ae) || ae.Code != api.CodeMaxPods || !strings.Contains(ae.Message, "max pods reached") ||
		!strings.Contains(ae.Message, "5/5") {
		t.Fatalf("the sixth pod's answer = %v, want %s saying max pods reached (5/5)", err, api.CodeMaxPods)
	}
	if !ae.Retryable {
		t.Error("max pods reached is not retryable: pods that leave make room")
	}
	simworld.WaitStatus(t, client, "the status saying max pods is reached", func(st *api.Status) bool {
		return strings.Contains(st.PoolStatus, "max pods reached") && strings.Contains(st.PoolStatus, "5/5")
	})
}
