package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/eniwire/eniwire/deploy/monitoring"
	"github.com/eniwire/eniwire/internal/testenv"
)

// rulesTest is what this package reads of a promtool rules test file.
type rulesTest struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Prometheus' own checker reads the shipped alert rules: they parse, and the rules test alerts.test.yaml
// finds each alert firing when it should and silent otherwise.
func TestTheAlertRulesPassPromtool(t *testing.T) {
	promtool := testenv.RequireTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "monitoring"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The rules test covers every alert both ways (an evaluation where it fires and one where it does not), and
// its input series are metrics the agent serves.
func TestTheRulesTestFiresAndSilencesEveryAlertOnTheAgentsMetrics(t *testing.T) {
	rules, err := monitoring.ReadRules(filepath.Join("monitoring", monitoring.AlertsFile))
	if err != nil {
		t.Fatal(err)
	}
	var tests rulesTest
	raw, err := os.ReadFile(filepath.Join("monitoring", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatalf("alerts.test.yaml: %v", err)
	}
	if len(tests.RuleFiles) != 1 || tests.RuleFiles[0] != "alerts.yaml" {
		t.Errorf("alerts.test.yaml tests %v, want [alerts.yaml]", tests.RuleFiles)
	}
	names := agentMetricNames(t)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			name, _, _ := strings.Cut(s.Series, "{")
			if !names[strings.TrimSpace(name)] {
				t.Errorf("alerts.test.yaml: input series %s: the agent serves no %s", s.Series, name)
			}
		}
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, r := range rules.Alerts() {
		if !fires[r.Alert] || !silent[r.Alert] {
			t.Errorf("alerts.test.yaml: alert %s: an evaluation where it fires: %v, one where it does not: %v", r.Alert, fires[r.Alert], silent[r.Alert])
		}
	}
}
