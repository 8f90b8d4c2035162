package controller_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller"
)

// resultLabel finds the result label values the controller counts assignments and releases with.
var resultLabel = regexp.MustCompile(`\.(assigns|releases)\.WithLabelValues\("(\w+)"\)`)

// Every result the controller counts an assignment or a release with is served at 0 from the start: a counter
// born at 1 shows no increase(), so an alert on the first "no IP yet" (deploy/monitoring/alerts.yaml) would
// not fire, and its panel would stay empty.
func TestEveryAssignAndReleaseResultIsServedAtZeroFromTheStart(t *testing.T) {
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]bool{"eniwire_assign_total": {}, "eniwire_release_total": {}}
	for _, path := range sources {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resultLabel.FindAllStringSubmatch(string(src), -1) {
			fam := map[string]string{"assigns": "eniwire_assign_total", "releases": "eniwire_release_total"}[m[1]]
			want[fam][m[2]] = true
		}
	}
	if len(want["eniwire_assign_total"]) < 3 || len(want["eniwire_release_total"]) < 2 {
		t.Fatalf("found the results %v in the controller's source, want those of assignments and releases", want)
	}

	w := newWorld(t, "m5.large", 200)
	reg := prometheus.NewRegistry()
	w.startWith(fastConfig(w.dir), controller.Deps{Registerer: reg})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					if served[f.GetName()] == nil {
						served[f.GetName()] = map[string]float64{}
					}
					served[f.GetName()][l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	for fam, results := range want {
		for r := range results {
			if v, ok := served[fam][r]; !ok {
				t.Errorf("%s{result=%q} is not served before the first count", fam, r)
			} else if v != 0 {
				t.Errorf("%s{result=%q} = %v before any pod, want 0", fam, r, v)
			}
		}
	}
}
