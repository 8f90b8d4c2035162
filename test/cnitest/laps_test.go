package cnitest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// reportAddLaps reads the "pod wired" lines the plugin logged for the ADDs of list and reports the p50 of each
// step it timed (open, veth, routes, agent_wait, address, total), and what each ADD cost outside the
// plugin's own code (process start and exit, libcni) at p50: the ADD p50 less the plugin's total p50.
func reportAddLaps(b *testing.B, list *libcni.NetworkConfigList, adds []time.Duration) {
	b.Helper()
	var conf struct {
		LogFile string `json:"logFile"`
	}
	if err := json.Unmarshal(list.Plugins[0].Bytes, &conf); err != nil || conf.LogFile == "" {
		b.Fatalf("the eniwire conflist names no logFile (%v)", err)
	}
	f, err := os.Open(conf.LogFile)
	if err != nil {
		b.Fatalf("reading the plugin log: %v", err)
	}
	defer f.Close()
	laps := map[string][]time.Duration{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != "pod wired" {
			continue
		}
		for k, v := range line {
			n, ok := v.(float64)
			if !ok || !strings.HasSuffix(k, "_ms") {
				continue
			}
			step := strings.TrimSuffix(k, "_ms")
			if laps[step] == nil {
				order = append(order, step)
			}
			laps[step] = append(laps[step], time.Duration(n*float64(time.Millisecond)))
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("reading the plugin log: %v", err)
	}
	if len(laps["total"]) == 0 {
		b.Fatalf("the plugin logged no timed ADD in %s", conf.LogFile)
	}
	slices.Sort(order)
	var parts []string
	for _, step := range order {
		parts = append(parts, fmt.Sprintf("%s %.2f", step, ms(percentile(laps[step], 50))))
	}
	outside := percentile(adds, 50) - percentile(laps["total"], 50)
	b.ReportMetric(ms(outside), "add-outside-plugin-p50-ms")
	b.Logf("eniwire ADD steps, p50 ms over %d ADDs: %s; outside the plugin's code (process, libcni) %.2f",
		len(laps["total"]), strings.Join(parts, ", "), ms(outside))
}
