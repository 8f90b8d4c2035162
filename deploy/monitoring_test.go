package deploy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/awscni"
	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/deploy/monitoring"
	"github.com/eniwire/eniwire/test/simworld"
)

// recorder is a registry that keeps what was registered, so that the test can list every metric name, those of
// vectors without a series yet included.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// agentMetricNames registers what the agent registers (cmd/eniwire-agent: Go and process collectors, the EC2
// client, the node controller, the BPF datapath's counters) and returns every metric name it serves, with
// ENIWIRE_AWSCNI_METRICS's awscni_* names and a histogram's _bucket, _sum and _count series.
func agentMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w := simworld.New(t, simworld.Options{})
	node := w.NewNodeWith(t, controller.Config{}, controller.Deps{EC2: w.EC2With(t, simworld.EC2Options{Metrics: rec}), Registerer: rec})
	t.Cleanup(func() { node.Close() })
	// The datapath's collector reads the pinned BPF maps when collected; its names come from Describe alone.
	rec.collectors = append(rec.collectors, datapath.NewCollector(nil))

	names := map[string]bool{}
	for _, c := range rec.collectors {
		descs := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	fams, err := awscni.Translate(rec).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	return names
}

// PromQL pieces that name no metric: label matchers, ranges, grouping clauses, strings, numbers and
// Grafana's variables.
var (
	notNames = []*regexp.Regexp{
		regexp.MustCompile(`\{[^}]*\}`),
		regexp.MustCompile(`\[[^\]]*\]`),
		regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`),
		regexp.MustCompile(`"[^"]*"`),
		regexp.MustCompile(`\$\w+`),
	}
	identifier = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	keywords   = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// metricNames are the metric names a PromQL expression reads.
func metricNames(expr string) []string {
	for _, re := range notNames {
		expr = re.ReplaceAllString(expr, " ")
	}
	var out []string
	for _, m := range identifier.FindAllString(expr, -1) {
		if strings.HasSuffix(m, "(") || slices.Contains(keywords, strings.ToLower(m)) {
			continue // a function or an aggregation
		}
		out = append(out, m)
	}
	return out
}

func TestMetricNamesOfAQuery(t *testing.T) {
	got := metricNames(`histogram_quantile(0.99, sum by (action, le) (rate(eniwire_ec2_call_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))
		and on (instance) max by (instance) (eniwire_ips{state="warm"}) == 0 or vector(1)`)
	want := []string{"eniwire_ec2_call_duration_seconds_bucket", "eniwire_ips"}
	if !slices.Equal(got, want) {
		t.Errorf("metricNames = %v, want %v", got, want)
	}
}

var labelValuesQuery = regexp.MustCompile(`^label_values\((\w+),\s*\w+\)$`)

// Every metric the shipped dashboard and alert rules read is one the agent serves, so neither shows an empty
// panel or an alert that can never fire after a rename.
func TestTheDashboardAndAlertsReadOnlyTheAgentsMetrics(t *testing.T) {
	names := agentMetricNames(t)
	queries := map[string]string{} // where: expression
	rules, err := monitoring.ReadRules(filepath.Join("monitoring", monitoring.AlertsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alerts.yaml: rule %+v lacks a name, an expression, a severity or a summary", r)
			}
			queries["alert "+r.Alert] = r.Expr
		}
	}
	dash, err := monitoring.ReadDashboard(filepath.Join("monitoring", monitoring.DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range dash.Queries() {
		queries[fmt.Sprintf("panel %q (query %d)", q.Panel, i+1)] = q.Expr
	}
	for _, v := range dash.Templating.List {
		if m := labelValuesQuery.FindStringSubmatch(v.Definition); m != nil {
			queries["variable "+v.Definition] = m[1]
		}
	}
	if len(rules.Groups) == 0 || len(dash.Panels) == 0 {
		t.Fatalf("read %d rule groups and %d panels", len(rules.Groups), len(dash.Panels))
	}
	for where, expr := range queries {
		read := metricNames(expr)
		if len(read) == 0 {
			t.Errorf("%s reads no metric: %s", where, expr)
		}
		for _, name := range read {
			if !names[name] {
				t.Errorf("%s reads %s, which the agent does not serve", where, name)
			}
		}
	}
}
