package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/deploy/monitoring"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

const prometheusCase = "5c. Prometheus scrapes both agents (ENIWIRE_AWSCNI_METRICS=true): every alert rule evaluates, every dashboard query returns series, the EKS alert's expression has a value"

// The kube-prometheus EKS alert (EksAvailableIPs) and the bare difference issue 25 names: both read only the
// AWS VPC CNI's names.
const (
	eksDifference = `awscni_ip_max - awscni_assigned_ip_addresses`
	eksAlertExpr  = `sum by(instance) (awscni_ip_max) - sum by(instance) (awscni_assigned_ip_addresses) < 10`
)

// awscniSelectors select the awscni_* series ENIWIRE_AWSCNI_METRICS serves with the AWS VPC CNI's labels
// (awscni_aws_api_error_count appears with EC2's first error only).
var awscniSelectors = []string{
	`awscni_ip_max`, `awscni_eni_max`, `awscni_eni_allocated`, `awscni_total_ip_addresses`,
	`awscni_assigned_ip_addresses`, `awscni_no_available_ip_addresses`,
	`awscni_ec2api_req_count{fn!=""}`, `awscni_ec2api_error_count{fn!=""}`,
	`awscni_aws_api_latency_ms_count{api!="",error=~"true|false",status!=""}`,
	`awscni_aws_api_latency_ms_sum{api!="",error=~"true|false",status!=""}`,
}

// metricsPort is where the agents serve /metrics (ENIWIRE_METRICS_ADDR in deploy/manifests), the AWS VPC
// CNI's port.
const metricsPort = 61678

// rateInterval stands for Grafana's $__rate_interval: four times the data source's scrape interval, 15 s
// unless set.
const rateInterval = "1m"

// prometheusScrape turns ENIWIRE_AWSCNI_METRICS on, runs Debian's Prometheus on the VPC host (a monitoring
// server elsewhere in the VPC) with deploy/monitoring/alerts.yaml as its rules and both nodes' agents as its
// targets, makes the agents assign and release a few pod IPs, and asks Prometheus' HTTP API: every alert rule
// evaluates without error, every query of deploy/monitoring/grafana-dashboard.json (its variables resolved as
// Grafana does) returns series, and the kube-prometheus EKS alert's expressions have a value per node. The
// setting stays on for the cases that follow, until case 6 uninstalls eniwire. With E2E_METRICS_DIR set, each
// agent's /metrics is saved there (the source of deploy/monitoring/alerts.test.yaml's series).
func (s *suite) prometheusScrape(t *testing.T) string {
	ctx := context.Background()
	binary := testenv.RequireTool(t, "prometheus")
	kubectl(t, s.c, "set", "env", "-n", "kube-system", "daemonset/eniwire", "-c", "agent", "ENIWIRE_AWSCNI_METRICS=true")
	kubectl(t, s.c, "rollout", "status", "-n", "kube-system", "daemonset/eniwire", "--timeout=3m")

	var targets []string
	for _, n := range s.c.Nodes {
		targets = append(targets, net.JoinHostPort(n.IP().String(), strconv.Itoa(metricsPort)))
	}
	prom := startPrometheus(t, s.c, binary, targets)

	// Pod IPs assigned and released, so the assignment and release panels have something to show.
	for i, n := range s.c.Nodes {
		name := fmt.Sprintf("scraped-%d", i+1)
		mustCreate(t, name, s.c.Client.AppsV1().Deployments(ns).Create, deployment(name, n.Name, 2))
		if _, err := waitPodsReady(ctx, s.c, ns, "app="+name, 2, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	s.deleteWorkloads(t)
	if dir := os.Getenv("E2E_METRICS_DIR"); dir != "" {
		saveAgentMetrics(t, s.c, targets, dir)
	}

	dir := filepath.Join(s.c.RepoRoot, "deploy", "monitoring")
	dash, err := monitoring.ReadDashboard(filepath.Join(dir, monitoring.DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := monitoring.ReadRules(filepath.Join(dir, monitoring.AlertsFile))
	if err != nil {
		t.Fatal(err)
	}
	queries := dash.Queries()
	var (
		counts map[string]int
		empty  []string
	)
	for end := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
		instances, err := prom.labelValues(ctx, "instance", "eniwire_ready")
		if err != nil {
			t.Fatal(err)
		}
		counts, empty = map[string]int{}, nil
		for _, q := range queries {
			expr := resolveVariables(q.Expr, map[string]string{"instance": strings.Join(instances, "|"), "__rate_interval": rateInterval})
			res, err := prom.query(ctx, expr)
			if err != nil {
				t.Fatalf("panel %q: %v", q.Panel, err)
			}
			counts[q.Panel] += len(res)
			if len(res) == 0 {
				empty = append(empty, fmt.Sprintf("panel %q: %s", q.Panel, expr))
			}
		}
		if len(empty) == 0 && len(instances) == len(targets) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("after a minute, %d of %d nodes in label_values(eniwire_ready, instance) (%v), and these dashboard queries return no series:\n%s",
				len(instances), len(targets), instances, strings.Join(empty, "\n"))
		}
	}

	rules, err := prom.rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(alerts.Alerts()); len(rules) != want {
		t.Errorf("Prometheus loaded %d alert rules, alerts.yaml holds %d", len(rules), want)
	}
	var returning []string
	for _, r := range rules {
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("alert %s: health %q, last error %q", r.Name, r.Health, r.LastError)
		}
		res, err := prom.query(ctx, r.Query)
		if err != nil {
			t.Errorf("alert %s: %v", r.Name, err)
		}
		if len(res) > 0 {
			returning = append(returning, r.Name)
		}
	}

	var eks []string
	for _, expr := range []string{eksDifference, eksAlertExpr} {
		res, err := prom.query(ctx, expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if expr == eksDifference {
			if len(res) != len(targets) {
				t.Errorf("%s: %d series, want one per node (%d)", expr, len(res), len(targets))
			}
			for _, r := range res {
				eks = append(eks, fmt.Sprintf("%s %s", r.Metric["instance"], r.Value))
			}
		} else if len(res) > 0 {
			t.Errorf("%s fires on a node with IPs to spare: %v", expr, res)
		}
	}
	awscni, err := prom.query(ctx, `count by (__name__) ({__name__=~"awscni_.+"})`)
	if err != nil {
		t.Fatal(err)
	}
	// The AWS VPC CNI's names (utils/prometheusmetrics) that every node serves, the API families once a call
	// was made, with their labels.
	for _, expr := range awscniSelectors {
		res, err := prom.query(ctx, expr)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) < len(targets) {
			t.Errorf("%s: %d series, want one per node at least", expr, len(res))
		}
	}
	samples, err := prom.query(ctx, `scrape_samples_scraped`)
	if err != nil {
		t.Fatal(err)
	}
	var scraped []string
	for _, r := range samples {
		scraped = append(scraped, fmt.Sprintf("%s %s", r.Metric["instance"], r.Value))
	}
	slices.Sort(scraped)
	slices.Sort(eks)
	series := 0
	for _, n := range counts {
		series += n
	}
	return fmt.Sprintf("samples per scrape: %s; %d alert rules evaluate (returning series: %v); %d panels, %d queries, %d series; %d awscni_* names; %s per node: %s",
		strings.Join(scraped, ", "), len(rules), returning, len(counts), len(queries), series, len(awscni), eksDifference, strings.Join(eks, ", "))
}

// prometheus is a Prometheus server the test runs, and its HTTP API.
type prometheus struct {
	client *http.Client
	base   string
}

// startPrometheus runs binary on the VPC host with a configuration written here: targets scraped every
// second as job eniwire, deploy/monitoring/alerts.yaml evaluated every second, storage in the cluster's
// scratch dir. It waits until both targets are up and stops the server when t ends.
func startPrometheus(t *testing.T, c *cluster.Cluster, binary string, targets []string) *prometheus {
	t.Helper()
	dir := filepath.Join(c.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: eniwire
    static_configs:
      - targets: [%s]
`, filepath.Join(c.RepoRoot, "deploy", "monitoring", monitoring.AlertsFile), strings.Join(quoted, ", "))
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	const listen = "127.0.0.1:9090" // inside the VPC host's network namespace
	host := c.Fabric.VPCHost()
	p, err := cluster.Start(dir, "prometheus", cluster.Namespaces{NetnsPath: host.NetnsPath}, nil, binary,
		"--config.file="+configPath, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("== prometheus (%s), last lines:\n%s", p.LogPath, p.Tail(20))
		}
		_ = p.Stop(10 * time.Second)
	})
	prom := &prometheus{client: vpcfabric.HTTPClient(host.NetnsPath), base: "http://" + listen}
	ctx := context.Background()
	var last string
	for end := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if !p.Running() {
			t.Fatalf("prometheus exited:\n%s", p.Tail(20))
		}
		up, err := prom.targetsUp(ctx)
		if err == nil && len(up) == len(targets) {
			return prom
		}
		last = fmt.Sprintf("up: %v, error: %v", up, err)
		if time.Now().After(end) {
			t.Fatalf("Prometheus' targets not all up after a minute (%s)", last)
		}
	}
}

// get calls the API at path with params and decodes its data into out.
func (p *prometheus) get(ctx context.Context, path string, params url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status, Error, ErrorType string
		Data                     json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("GET %s %v: %s: %s", path, params, body.ErrorType, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

// sample is one series of an instant query's vector and its value.
type sample struct {
	Metric map[string]string
	Value  string
}

// query evaluates expr now; a scalar answer is one sample without labels.
func (p *prometheus) query(ctx context.Context, expr string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, not a vector", expr, data.ResultType)
	}
	var vec []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := json.Unmarshal(data.Result, &vec); err != nil {
		return nil, err
	}
	out := make([]sample, len(vec))
	for i, v := range vec {
		out[i] = sample{Metric: v.Metric, Value: fmt.Sprint(v.Value[1])}
	}
	return out, nil
}

// labelValues are the values of label among the series of metric (Grafana's label_values(metric, label)).
func (p *prometheus) labelValues(ctx context.Context, label, metric string) ([]string, error) {
	var values []string
	err := p.get(ctx, "/api/v1/label/"+label+"/values", url.Values{"match[]": {metric}}, &values)
	return values, err
}

// targetsUp are the scrape targets whose last scrape worked.
func (p *prometheus) targetsUp(ctx context.Context) ([]string, error) {
	var data struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
		} `json:"activeTargets"`
	}
	if err := p.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return nil, err
	}
	var up []string
	for _, tg := range data.ActiveTargets {
		if tg.Health == "up" {
			up = append(up, tg.ScrapeURL)
		}
	}
	return up, nil
}

// rule is an alert rule as Prometheus loaded and last evaluated it.
type rule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

// rules are the alert rules Prometheus evaluates, once each has been evaluated.
func (p *prometheus) rules(ctx context.Context) ([]rule, error) {
	var data struct {
		Groups []struct {
			Rules []struct {
				rule
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"rules"`
		} `json:"groups"`
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		if err := p.get(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
			return nil, err
		}
		var out []rule
		evaluated := true
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				out = append(out, r.rule)
				evaluated = evaluated && !r.LastEvaluation.IsZero()
			}
		}
		if evaluated || time.Now().After(end) {
			return out, nil
		}
	}
}

var grafanaVariable = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// resolveVariables replaces Grafana's $name and ${name} in expr by their values.
func resolveVariables(expr string, values map[string]string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}")
		if value, ok := values[name]; ok {
			return value
		}
		return v
	})
}

// saveAgentMetrics writes each target's /metrics, as fetched from the VPC host, to dir.
func saveAgentMetrics(t *testing.T, c *cluster.Cluster, targets []string, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		body, err := get(context.Background(), c.Fabric.VPCHost().NetnsPath, "http://"+tg+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(tg, ":", "_")+".txt"), []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
