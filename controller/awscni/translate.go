// Package awscni serves the AWS VPC CNI's metric names and labels (awscni_*), computed from eniwire's own
// metrics at each scrape, so that dashboards and alerts written for aws-node read an eniwire node unchanged.
//
// Meanings follow the AWS VPC CNI: awscni_ip_max and awscni_eni_max leave out ENIs someone else attached;
// awscni_total_ip_addresses counts every pod IP in the books (assigned, warm and in cooldown);
// awscni_eni_allocated counts the attached ENIs, primary included. The AWS API families count EC2 attempts as
// eniwire's client makes them; awscni_aws_api_latency_ms has the AWS VPC CNI's api, error and status labels, its
// count and milliseconds from eniwire_ec2_calls_total and eniwire_ec2_call_seconds_total.
package awscni

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// Translate is a gatherer of the awscni_* families computed from what source gathers. Serve it next to source
// (prometheus.Gatherers{source, Translate(source)}); it is not a collector, so it never joins a registry.
func Translate(source prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := source.Gather()
		if fams == nil {
			return nil, err
		}
		return translate(index(fams)), err
	})
}

// families are the gathered families by name.
type families map[string]*dto.MetricFamily

func index(fams []*dto.MetricFamily) families {
	out := families{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// value is the sum of the samples of the counter or gauge family name whose labels match every pair of want.
func (f families) value(name string, want map[string][]string) float64 {
	fam := f[name]
	if fam == nil {
		return 0
	}
	var sum float64
	for _, m := range fam.Metric {
		if matches(m, want) {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// matches says whether every label named in want has one of its values in m.
func matches(m *dto.Metric, want map[string][]string) bool {
	for name, values := range want {
		if !slices.Contains(values, label(m, name)) {
			return false
		}
	}
	return true
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Outcomes and codes of eniwire_ec2_calls_total (package ec2client).
var (
	failedOutcomes = []string{"throttled", "error", "canceled"}
	apiErrorCodes  = []string{"transport", "context"} // not EC2 error codes: no awscni_aws_api_error_count sample
)

func translate(f families) []*dto.MetricFamily {
	eniMax := f.value("eniwire_max_enis", nil) - f.value("eniwire_foreign_enis", nil)
	out := []*dto.MetricFamily{
		gauge("awscni_ip_max", "The maximum number of IP addresses that can be allocated to the instance, leaving out ENIs attached by others.",
			f.value("eniwire_ips_per_eni", nil)*eniMax),
		gauge("awscni_eni_max", "The maximum number of ENIs that can be attached to the instance, leaving out ENIs attached by others.", eniMax),
		gauge("awscni_eni_allocated", "The number of ENIs allocated (attached, primary included).",
			f.value("eniwire_enis", map[string][]string{"state": {"attached", "ready"}})),
		gauge("awscni_total_ip_addresses", "The total number of pod IP addresses (assigned, warm and in cooldown).",
			f.value("eniwire_ips", nil)),
		gauge("awscni_assigned_ip_addresses", "The number of IP addresses assigned to pods.",
			f.value("eniwire_ips", map[string][]string{"state": {"assigned"}})),
		counter("awscni_no_available_ip_addresses", "The number of pod IP assignments that failed for want of a free IP address (max pods included).",
			f.value("eniwire_assign_total", map[string][]string{"result": {"no_ip", "max_pods"}})),
	}
	out = append(out, apiFamilies(f)...)
	return out
}

// apiFamilies are the AWS API families, one sample per EC2 action (and error code) eniwire's client has used.
func apiFamilies(f families) []*dto.MetricFamily {
	reqs := &dto.MetricFamily{Name: proto.String("awscni_ec2api_req_count"), Help: proto.String("The number of requests made to EC2 APIs."), Type: dto.MetricType_COUNTER.Enum()}
	errs := &dto.MetricFamily{Name: proto.String("awscni_ec2api_error_count"), Help: proto.String("The number of failed EC2 API requests."), Type: dto.MetricType_COUNTER.Enum()}
	apiErrs := &dto.MetricFamily{Name: proto.String("awscni_aws_api_error_count"), Help: proto.String("The number of times the AWS API returned an error, by API and error code."), Type: dto.MetricType_COUNTER.Enum()}
	latency := &dto.MetricFamily{Name: proto.String("awscni_aws_api_latency_ms"), Help: proto.String("AWS API call latency in ms."), Type: dto.MetricType_SUMMARY.Enum()}
	perFn := map[string][2]float64{} // action: requests, errors
	perCode := map[[2]string]float64{}
	perStatus := map[[3]string][2]float64{} // api, error, status: attempts, seconds
	seconds := map[[3]string]float64{}
	if d := f["eniwire_ec2_call_seconds_total"]; d != nil {
		for _, m := range d.Metric {
			seconds[[3]string{label(m, "action"), label(m, "outcome"), label(m, "code")}] += m.GetCounter().GetValue()
		}
	}
	if calls := f["eniwire_ec2_calls_total"]; calls != nil {
		for _, m := range calls.Metric {
			action, outcome, code, n := label(m, "action"), label(m, "outcome"), label(m, "code"), m.GetCounter().GetValue()
			c := perFn[action]
			c[0] += n
			failed := slices.Contains(failedOutcomes, outcome)
			if failed {
				c[1] += n
				if outcome != "canceled" && !slices.Contains(apiErrorCodes, code) {
					perCode[[2]string{action, code}] += n
				}
			}
			perFn[action] = c
			key := [3]string{action, strconv.FormatBool(failed), status(outcome, code)}
			st := perStatus[key]
			st[0] += n
			st[1] += seconds[[3]string{action, outcome, code}]
			perStatus[key] = st
		}
	}
	for action, c := range perFn {
		reqs.Metric = append(reqs.Metric, counterSample(c[0], "fn", action))
		errs.Metric = append(errs.Metric, counterSample(c[1], "fn", action))
	}
	for k, n := range perCode {
		apiErrs.Metric = append(apiErrs.Metric, counterSample(n, "api", k[0], "error", k[1]))
	}
	for k, st := range perStatus {
		latency.Metric = append(latency.Metric, &dto.Metric{
			Label:   labels("api", k[0], "error", k[1], "status", k[2]),
			Summary: &dto.Summary{SampleCount: proto.Uint64(uint64(st[0])), SampleSum: proto.Float64(st[1] * 1000)},
		})
	}
	var out []*dto.MetricFamily
	for _, fam := range []*dto.MetricFamily{reqs, errs, apiErrs, latency} {
		if len(fam.Metric) > 0 {
			slices.SortFunc(fam.Metric, func(a, b *dto.Metric) int { return cmp.Compare(a.String(), b.String()) })
			out = append(out, fam)
		}
	}
	return out
}

// status is the AWS VPC CNI's status label of an attempt: "200" when it worked, EC2's error code when EC2
// answered with one, empty when the call got no answer (transport failure, context ended).
func status(outcome, code string) string {
	switch {
	case outcome == "success":
		return "200"
	case outcome == "canceled" || slices.Contains(apiErrorCodes, code):
		return ""
	}
	return code
}

func gauge(name, help string, v float64) *dto.MetricFamily {
	return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum(),
		Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: proto.Float64(v)}}}}
}

func counter(name, help string, v float64) *dto.MetricFamily {
	return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_COUNTER.Enum(),
		Metric: []*dto.Metric{counterSample(v)}}
}

func counterSample(v float64, pairs ...string) *dto.Metric {
	return &dto.Metric{Label: labels(pairs...), Counter: &dto.Counter{Value: proto.Float64(v)}}
}

func labels(pairs ...string) []*dto.LabelPair {
	var out []*dto.LabelPair
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &dto.LabelPair{Name: proto.String(pairs[i]), Value: proto.String(pairs[i+1])})
	}
	return out
}
