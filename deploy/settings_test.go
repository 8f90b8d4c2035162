package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
)

var settingUsage = regexp.MustCompile(`\(env ([A-Z][A-Za-z0-9_]*), default ("(?:[^"\\]|\\.)*")\)`)

// agentSettings builds cmd/eniwire-agent and reads its settings from its -help output, where every flag's
// usage names its environment variable and default: the agent's own statement of what it reads.
func agentSettings(t *testing.T) map[string]string {
	t.Helper()
	agent := testenv.Binary(t, "eniwire-agent", "github.com/eniwire/eniwire/cmd/eniwire-agent")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, agent, "-help")
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // no setting from this test's environment
	out, _ := cmd.CombinedOutput()           // -help exits non-zero; the output is what matters
	settings := map[string]string{}
	for _, m := range settingUsage.FindAllStringSubmatch(string(out), -1) {
		def, err := strconv.Unquote(m[2])
		if err != nil {
			t.Fatalf("default of %s: %v", m[1], err)
		}
		settings[m[1]] = def
	}
	if len(settings) < 5 {
		t.Fatalf("read only %d settings from eniwire-agent -help; has its usage format changed?\n%s", len(settings), out)
	}
	return settings
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diffSets lists the names only in want and only in got.
func diffSets(want, got map[string]string) (missing, extra []string) {
	for _, k := range sortedKeys(want) {
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	return missing, extra
}

// The manifest and the chart set exactly the agent's settings, each to the agent's default: a setting added to
// the agent and not to the deployment (or the other way round) fails here.
func TestTheDeploymentSetsExactlyTheAgentsSettingsWithTheirDefaults(t *testing.T) {
	want := agentSettings(t)
	t.Logf("the agent reads %d settings: %s", len(want), strings.Join(sortedKeys(want), " "))
	for _, src := range []struct {
		name string
		objs func(t *testing.T) objects
	}{
		{"the manifest", func(t *testing.T) objects { return decodeAll(t, readDir(t, "manifests")) }},
		{"the chart with default values", func(t *testing.T) objects {
			return decodeAll(t, renderChart(t, "eniwire", "kube-system", nil))
		}},
	} {
		t.Run("in "+src.name, func(t *testing.T) {
			ds := theOne(t, "DaemonSet", src.objs(t).daemonSets)
			got := envMap(t, agentContainer(t, ds))
			missing, extra := diffSets(want, got)
			if len(missing) > 0 {
				t.Errorf("settings the agent reads but the deployment does not set: %v", missing)
			}
			if len(extra) > 0 {
				t.Errorf("env vars the deployment sets but the agent does not read: %v", extra)
			}
			for _, k := range sortedKeys(want) {
				if v, ok := got[k]; ok && v != want[k] {
					t.Errorf("%s = %q, want the agent's default %q", k, v, want[k])
				}
			}
		})
	}
}

// The settings table of docs/settings.md names exactly the agent's settings, so the docs cannot drift.
func TestTheSettingsDocListsEverySetting(t *testing.T) {
	want := agentSettings(t)
	raw, err := os.ReadFile(filepath.Join("..", "docs", "settings.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range settingRow.FindAllStringSubmatch(string(raw), -1) {
		got[m[1]] = ""
	}
	missing, extra := diffSets(want, got)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("docs/settings.md: missing %v, not read by the agent %v", missing, extra)
	}
}

var settingRow = regexp.MustCompile("(?m)^\\| `([A-Z][A-Za-z0-9_]*)` \\|")
