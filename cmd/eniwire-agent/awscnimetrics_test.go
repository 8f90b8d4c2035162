package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/agent"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/test/simworld"
)

// TestAWSCNIMetricsOnlyWithTheSetting serves a simulated node's /metrics as the agent does, with
// ENIWIRE_AWSCNI_METRICS unset and set: the awscni_* families appear only when it is on, next to eniwire's own.
func TestAWSCNIMetricsOnlyWithTheSetting(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := simworld.New(t, simworld.Options{Type: "m5.large", Factor: 100})
	node := w.NewNodeWith(t, controller.Config{PoolInterval: 100 * time.Millisecond},
		controller.Deps{EC2: w.EC2With(t, simworld.EC2Options{Metrics: reg}), Registerer: reg})
	_, c := simworld.Serve(t, node)
	simworld.WaitStatus(t, c, "counting its limits", func(*api.Status) bool {
		fams, err := reg.Gather()
		for _, f := range fams {
			if f.GetName() == "eniwire_max_enis" {
				return err == nil && f.Metric[0].GetGauge().GetValue() == 3
			}
		}
		return false
	})

	t.Setenv("ENIWIRE_AWSCNI_METRICS", "") // restored after the test
	os.Unsetenv("ENIWIRE_AWSCNI_METRICS")
	for _, tc := range []struct {
		env  string
		want bool
	}{{"", false}, {"false", false}, {"true", true}} {
		if tc.env != "" {
			t.Setenv("ENIWIRE_AWSCNI_METRICS", tc.env)
		}
		s, err := parseSettings(nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(agent.OpsHandler(node, metricsGatherer(reg, s.awsCNIMetrics)))
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		text := string(body)
		if !strings.Contains(text, "\neniwire_max_enis 3\n") {
			t.Errorf("ENIWIRE_AWSCNI_METRICS=%q: eniwire's own eniwire_max_enis 3 missing from /metrics", tc.env)
		}
		for _, line := range []string{"\nawscni_eni_max 3\n", "\nawscni_ip_max 27\n", `awscni_ec2api_req_count{fn="DescribeNetworkInterfaces"}`} {
			if strings.Contains(text, line) != tc.want {
				t.Errorf("ENIWIRE_AWSCNI_METRICS=%q: %q in /metrics is %v, want %v", tc.env, strings.TrimSpace(line), !tc.want, tc.want)
			}
		}
	}
}
