package awscni_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/awscni"
	"github.com/eniwire/eniwire/test/simworld"
)

// samples reads the gathered families as "name{labels}" -> value (a summary's _sum and _count apart).
func samples(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			key := f.GetName() + labelText(m)
			switch f.GetType() {
			case dto.MetricType_SUMMARY:
				out[f.GetName()+"_sum"+labelText(m)] = m.GetSummary().GetSampleSum()
				out[f.GetName()+"_count"+labelText(m)] = float64(m.GetSummary().GetSampleCount())
			case dto.MetricType_HISTOGRAM:
				out[f.GetName()+"_sum"+labelText(m)] = m.GetHistogram().GetSampleSum()
				out[f.GetName()+"_count"+labelText(m)] = float64(m.GetHistogram().GetSampleCount())
			default:
				out[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func labelText(m *dto.Metric) string {
	if len(m.Label) == 0 {
		return ""
	}
	pairs := make([]string, len(m.Label))
	for i, l := range m.Label {
		pairs[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	return "{" + strings.Join(pairs, ",") + "}"
}

// TestAWSCNIMetricsOfASimulatedNode runs a node of an m5.large (3 ENIs of 10 addresses) against ec2sim, gives
// three pods IPs, and reads the awscni_* families through the agent's registry: they carry the node's limits,
// its books and its EC2 calls with the AWS VPC CNI's meanings. awscni_ip_max is 3 ENIs x 9 secondary
// addresses, or x 9 prefixes of 16 in prefix mode, as the AWS VPC CNI counts it.
func TestAWSCNIMetricsOfASimulatedNode(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		prefix bool
		ipMax  float64
	}{{"secondary IPs", false, 3 * 9}, {"prefixes", true, 3 * 9 * 16}} {
		t.Run(tc.mode, func(t *testing.T) { checkAWSCNIMetrics(t, tc.prefix, tc.ipMax) })
	}
}

func checkAWSCNIMetrics(t *testing.T, prefix bool, ipMax float64) {
	reg := prometheus.NewRegistry()
	w := simworld.New(t, simworld.Options{Type: "m5.large", Factor: 100})
	node := w.NewNodeWith(t, controller.Config{PoolInterval: 100 * time.Millisecond, WarmIPTarget: 3, EnablePrefixDelegation: prefix},
		controller.Deps{EC2: w.EC2With(t, simworld.EC2Options{Metrics: reg}), Registerer: reg})
	_, c := simworld.Serve(t, node)
	// An ADD that comes before the pool's first IPs is refused and retried, as kubelet retries it: each
	// refusal is one awscni_no_available_ip_addresses.
	refused := 0
	for i := range 3 {
		req := api.AssignRequest{Attachment: api.Attachment{ContainerID: fmt.Sprintf("container-%d", i), IfName: "eth0"},
			Pod: api.PodIdentity{Namespace: "default", Name: fmt.Sprintf("web-%d", i)}, HostVeth: fmt.Sprintf("eniw%d", i)}
		simworld.WaitStatus(t, c, "assigning", func(*api.Status) bool {
			_, err := c.Assign(context.Background(), req)
			var ae *api.Error
			if errors.As(err, &ae) && (ae.Code == api.CodeNoIPAvailable || ae.Code == api.CodeMaxPods) {
				refused++
			}
			return err == nil
		})
	}
	translated := awscni.Translate(reg)
	// The pool keeps working while the test reads (an assign of WARM_IP_TARGET's may be under way), so the
	// metrics and the status are compared only once two readings around them agree: the status, the metrics,
	// then the status again, unchanged.
	attachedIn := func(st *api.Status) (n int) {
		for _, e := range st.ENIs {
			if e.State == "attached" || e.State == "ready" {
				n++
			}
		}
		return n
	}
	var got map[string]float64
	var st *api.Status
	simworld.WaitStatus(t, c, "counted by the metrics, the status unchanged around them", func(before *api.Status) bool {
		got = samples(t, translated)
		after, err := c.Status(context.Background())
		if err != nil {
			t.Fatalf("reading the status: %v", err)
		}
		st = after
		return got["awscni_assigned_ip_addresses"] == 3 && reflect.DeepEqual(before, after) &&
			got["awscni_total_ip_addresses"] == float64(after.Assigned+after.Warm+after.Cooldown) &&
			got["awscni_eni_allocated"] == float64(attachedIn(after))
	})
	attached := attachedIn(st)
	want := map[string]float64{
		"awscni_eni_max":                   3,
		"awscni_ip_max":                    ipMax,
		"awscni_assigned_ip_addresses":     3,
		"awscni_total_ip_addresses":        float64(st.Assigned + st.Warm + st.Cooldown),
		"awscni_eni_allocated":             float64(attached),
		"awscni_no_available_ip_addresses": float64(refused),
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v (status %+v)", name, got[name], v, st)
		}
	}
	if got["awscni_total_ip_addresses"] < 3+3 {
		t.Errorf("awscni_total_ip_addresses = %v, want at least the 3 assigned and WARM_IP_TARGET's 3", got["awscni_total_ip_addresses"])
	}

	own := samples(t, reg)
	var calls float64
	for _, action := range []string{"DescribeNetworkInterfaces", "AssignPrivateIpAddresses"} {
		var n, ok float64
		for k, v := range own {
			if strings.HasPrefix(k, "eniwire_ec2_calls_total{") && strings.Contains(k, `action="`+action+`"`) {
				n += v
				if strings.Contains(k, `outcome="success"`) {
					ok += v
				}
			}
		}
		key := `awscni_ec2api_req_count{fn="` + action + `"}`
		if n == 0 || got[key] < n {
			t.Errorf("%s = %v, want at least the %v attempts eniwire counted before", key, got[key], n)
		}
		calls += n
		series := `{api="` + action + `",error="false",status="200"}`
		if got["awscni_aws_api_latency_ms_count"+series] < ok || got["awscni_aws_api_latency_ms_sum"+series] <= 0 {
			t.Errorf("awscni_aws_api_latency_ms_count%s = %v (sum %v), want at least the %v successful calls", series,
				got["awscni_aws_api_latency_ms_count"+series], got["awscni_aws_api_latency_ms_sum"+series], ok)
		}
	}
	if calls == 0 {
		t.Fatal("no EC2 call counted")
	}
}

// awscni_aws_api_latency_ms carries the AWS VPC CNI's labels: api, error ("true" or "false") and status ("200",
// EC2's error code, or empty when the call got no answer), with the count and milliseconds of eniwire's attempts.
func TestAWSAPILatencyCarriesTheErrorAndStatusLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_ec2_calls_total"}, []string{"action", "outcome", "code"})
	seconds := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eniwire_ec2_call_seconds_total"}, []string{"action", "outcome", "code"})
	reg.MustRegister(calls, seconds)
	for _, a := range []struct {
		outcome, code string
		n, seconds    float64
	}{
		{"success", "none", 3, 0.3},
		{"throttled", "RequestLimitExceeded", 2, 0.1},
		{"error", "transport", 1, 2},
		{"canceled", "context", 1, 10},
	} {
		calls.WithLabelValues("DeleteNetworkInterface", a.outcome, a.code).Add(a.n)
		seconds.WithLabelValues("DeleteNetworkInterface", a.outcome, a.code).Add(a.seconds)
	}
	got := samples(t, awscni.Translate(reg))
	for series, want := range map[string][2]float64{
		`{api="DeleteNetworkInterface",error="false",status="200"}`:                 {3, 300},
		`{api="DeleteNetworkInterface",error="true",status="RequestLimitExceeded"}`: {2, 100},
		`{api="DeleteNetworkInterface",error="true",status=""}`:                     {2, 12000},
	} {
		count, sum := got["awscni_aws_api_latency_ms_count"+series], got["awscni_aws_api_latency_ms_sum"+series]
		if count != want[0] || math.Abs(sum-want[1]) > 1e-6 {
			t.Errorf("awscni_aws_api_latency_ms%s: count %v, sum %v ms; want %v, %v", series, count, sum, want[0], want[1])
		}
	}
	if got[`awscni_aws_api_error_count{api="DeleteNetworkInterface",error="RequestLimitExceeded"}`] != 2 {
		t.Errorf("awscni_aws_api_error_count: %v, want 2 RequestLimitExceeded", got)
	}
}
