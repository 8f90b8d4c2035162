package controller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/agent"
)

// TestDefiniteCreateRefusalsBackOffAcrossPlans: EC2 refuses every CreateNetworkInterface for a reason a retry
// will not fix. Each refusal drops its plan; the next plan must not follow at once (310 refused creates in
// ten virtual minutes, each with two fsyncs, drained the account's bucket). The pool backs off per error
// class, exponentially, and says why in the status and a metric.
func TestDefiniteCreateRefusalsBackOffAcrossPlans(t *testing.T) {
	for _, code := range []string{"InvalidGroup.NotFound", "InvalidSubnetID.NotFound", "IdempotentParameterMismatch",
		"PrivateIpAddressLimitExceeded"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "m5.large", 200)
			w.sim.Faults().SetProbability("CreateNetworkInterface", code, 1)
			reg := prometheus.NewRegistry()
			r := w.startWith(fastConfig(w.dir), controller.Deps{Registerer: reg})
			waitReady(t, r.node)
			// One pod leaves the primary short of a whole free ENI: WARM_ENI_TARGET=1 wants a second ENI.
			assignRetrying(t, r.node, "pod-0")
			w.passVirtual(10*time.Minute, nil)
			if n := w.sim.Counters()["CreateNetworkInterface"].Calls; n > 15 {
				t.Errorf("%d refused creates in ten virtual minutes: each refusal was re-planned at once", n)
			}
			if s := r.node.Status().PoolStatus; !strings.Contains(s, code) {
				t.Errorf("pool status %q does not name %s", s, code)
			}
			ops := httptest.NewServer(agent.OpsHandler(r.node, reg))
			defer ops.Close()
			resp, err := http.Get(ops.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf(`eniwire_ec2_refusals_total{action="CreateNetworkInterface",code=%q}`, code); !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %s", want)
			}
			// The refusal ends: the pool grows again.
			w.sim.Faults().Reset()
			eventually(t, 30*time.Second, "a secondary ENI once EC2 accepts the create", func() error {
				if len(secondary(r.node.Snapshot())) == 0 {
					return fmt.Errorf("none yet (%s)", r.node.Status().PoolStatus)
				}
				return nil
			})
			_ = context.Background
		})
	}
}
