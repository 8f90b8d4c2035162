// Package monitoring reads the shipped Grafana dashboard (grafana-dashboard.json) and Prometheus alert rules
// (alerts.yaml) of this directory, for the tests that hold them to the agent's metrics (package deploy) and to
// a real Prometheus (test/k8s/e2e).
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// The files of this directory.
const (
	DashboardFile = "grafana-dashboard.json"
	AlertsFile    = "alerts.yaml"
)

// RuleFile is a Prometheus rules file (and a PrometheusRule's spec).
type RuleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []Rule `json:"rules"`
	} `json:"groups"`
}

// Rule is one alerting or recording rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// ReadRules decodes the rules file at path strictly (an unknown key is an error).
func ReadRules(path string) (*RuleFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f RuleFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return &f, nil
}

// Alerts are the alerting rules of every group.
func (f *RuleFile) Alerts() []Rule {
	var out []Rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// Dashboard is the part of a Grafana dashboard that holds queries.
type Dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// ReadDashboard decodes the dashboard at path.
func ReadDashboard(path string) (*Dashboard, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return &d, nil
}

// Query is one query of a panel.
type Query struct{ Panel, Expr string }

// Queries are the queries of every panel, in order.
func (d *Dashboard) Queries() []Query {
	var out []Query
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, Query{p.Title, t.Expr})
		}
	}
	return out
}
