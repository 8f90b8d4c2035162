package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/test/k8s/cluster"
)

// A full node names why a pod gets no IP: on node 2, full since case 2b (every ENI full, kubelet's max pods
// reached), the plugin's ADD for one more container, run on the node as the runtime runs it, fails at once
// (there is no refill to wait for) with an error that names the cause, the ENI and IP limits, and the setting
// or action that gives the node room; the Deployment's pod that the scheduler placed on the node fails its ADD
// with the same words. Case 4g checks, minutes later, that the pod still fails so and kubelet still retries it.

const (
	fullCauseCase = "2c. on the full node a new pod's ADD fails at once, naming the cause and what fixes it"
	// fullADDAtOnce bounds a failed ADD on a node that cannot get an IP: no wait for a refill.
	fullADDAtOnce = 2 * time.Second
)

// fullNodeWords are what a full node's failed ADD says: why there is no IP (the ENI and IP limits) and what
// fixes it (a setting or an action); each entry is a set of alternatives.
var fullNodeWords = []struct {
	what string
	any  []string
}{
	{"why: the ENI and IP limits", []string{"at the ENI limit", "ENI and IP limits"}},
	{"the fix", []string{"larger instance type", "ENABLE_PREFIX_DELEGATION"}},
}

// namesFullCause says what a full node's failed ADD message lacks, nil when it names the cause and the fix.
func namesFullCause(msg string) error {
	var lacks []string
	for _, w := range fullNodeWords {
		found := false
		for _, a := range w.any {
			found = found || strings.Contains(msg, a)
		}
		if !found {
			quoted := make([]string, len(w.any))
			for i, a := range w.any {
				quoted[i] = strconv.Quote(a)
			}
			lacks = append(lacks, fmt.Sprintf("%s (%s)", w.what, strings.Join(quoted, " or ")))
		}
	}
	if len(lacks) > 0 {
		return fmt.Errorf("the failed ADD does not name %s: %q", strings.Join(lacks, " nor "), msg)
	}
	return nil
}

// fullNodeCause runs one ADD on the full node and checks its error and the failing pods' events.
func (s *suite) fullNodeCause(t *testing.T) string {
	ctx := context.Background()
	if s.full == nil {
		t.Fatalf("case %q did not fill the node", fillNodeCase)
	}
	n := s.node2
	took, cniErr, err := addOneMore(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	msg := cniErr.Msg + "; " + cniErr.Details
	if took > fullADDAtOnce {
		t.Errorf("the ADD on the full node failed after %s, want at once (under %s): %q", took.Round(time.Millisecond), fullADDAtOnce, msg)
	}
	if err := namesFullCause(msg); err != nil {
		t.Errorf("the plugin's ADD on the full node: %v", err)
	}
	f, err := s.fullPods(ctx, n, s.full.maxPods)
	if err != nil {
		t.Fatal(err)
	}
	if err := namesFullCause(f.cause); err != nil {
		t.Errorf("the pod's FailedCreatePodSandBox: %v", err)
	}
	s.full.failedADDs = f.failedADDs
	return fmt.Sprintf("%s: one more ADD failed in %dms, CNI error %d: %q; %d pods failing ADD (%d FailedCreatePodSandBox so far)",
		short(n.Name), took.Milliseconds(), cniErr.Code, msg, f.failingADD, f.failedADDs)
}

// cniError is the error a CNI plugin prints on standard output.
type cniError struct {
	Code    int    `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// addOneMore runs the plugin's ADD on n for a container of its own, in a network namespace made for it on
// the node, and returns how long the ADD took and the error it printed; an ADD that succeeds is an error
// (its assignment is deleted again). The namespace is removed after, with a DEL for whatever the ADD left.
func addOneMore(ctx context.Context, n *cluster.Node) (time.Duration, cniError, error) {
	const netns = "eniwire-e2e-one-more"
	id := fmt.Sprintf("e2e%013d", time.Now().UnixNano()%1e13)
	if out, err := n.NS().Command(ctx, "ip", "netns", "add", netns).CombinedOutput(); err != nil {
		return 0, cniError{}, fmt.Errorf("making a network namespace on %s: %v: %s", short(n.Name), err, out)
	}
	env := []string{"CNI_CONTAINERID=" + id, "CNI_NETNS=/run/netns/" + netns, "CNI_IFNAME=eth0",
		"CNI_ARGS=K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=one-more;K8S_POD_INFRA_CONTAINER_ID=" + id}
	defer func() {
		_, _ = cniPlugin(context.Background(), n, append(env, "CNI_COMMAND=DEL")...)
		_ = n.NS().Command(context.Background(), "ip", "netns", "delete", netns).Run()
	}()
	start := time.Now()
	out, err := cniPlugin(ctx, n, append(env, "CNI_COMMAND=ADD")...)
	took := time.Since(start)
	if err == nil {
		return took, cniError{}, fmt.Errorf("the ADD on the full node %s succeeded: %s", short(n.Name), out)
	}
	var e cniError
	if jerr := json.Unmarshal(out, &e); jerr != nil || e.Code == 0 {
		return took, e, fmt.Errorf("the ADD on %s failed without a CNI error: %v: %s", short(n.Name), err, out)
	}
	return took, e, nil
}
