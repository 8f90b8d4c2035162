package cnitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/internal/testenv"
)

const benchPods = 200

// BenchmarkAddDelThroughLibcni wires and unwires benchPods pods through libcni with the built binary and a warm
// pool, and reports p50/p99 of ADD and DEL and the plugin's peak RSS: once against the agent double (the
// plugin's own cost) and once against the real agent on test/ec2sim (an m5.4xlarge, whose 8 ENIs hold 232
// pod IPs, warmed with WARM_IP_TARGET before the clock starts).
// Run it with: go test -run '^$' -bench AddDel -benchtime 1x ./test/cnitest
func BenchmarkAddDelThroughLibcni(b *testing.B) {
	testenv.RequireRoot(b)
	b.Run("agent=double", func(b *testing.B) {
		node := NewNode(b, "10.217.255.1")
		ips := make([]string, 0, benchPods)
		for i := range benchPods {
			ips = append(ips, fmt.Sprintf("10.217.%d.%d", i/200, 10+i%200))
		}
		benchAddDel(b, node, StartAgentDouble(b, node, ips).Socket)
	})
	b.Run("agent=real", func(b *testing.B) {
		node := NewNode(b, "10.220.255.1")
		agent := StartAgent(b, node, AgentOptions{
			Binary: bins.Agent, InstanceType: "m5.4xlarge", SubnetCIDR: "10.220.0.0/20", WarmIPs: benchPods,
			// Released IPs come back at once, so every b.Loop round finds the pool warm again; kubelet runs
			// with --max-pods 234 (eni-max-pods.txt), above the 110 eniwire computes by default.
			Env: []string{"IP_COOLDOWN_PERIOD=0s", "MAX_PODS=234"},
		})
		benchAddDel(b, node, agent.Socket)
	})
}

func benchAddDel(b *testing.B, node ns.NetNS, socket string) {
	list := deployConflist(b, socket, "1.0.0", false)
	pods := newPods(b)
	var adds, dels []time.Duration
	for b.Loop() {
		adds, dels = addDelAll(b, node, list, pods)
	}
	drainVeths(b, node)
	reportAddDel(b, "", adds, dels)
	b.ReportMetric(float64(peakRSS(b, node, socket)), "plugin-peak-rss-KiB")
	for _, op := range []struct {
		name string
		d    []time.Duration
	}{{"ADD", adds}, {"DEL", dels}} {
		if p99 := percentile(op.d, 99); p99 > 50*time.Millisecond {
			b.Logf("%s p99 %v is over the 50 ms target", op.name, p99)
		}
	}
}

// BenchmarkAddDelVersusReferencePtp wires and unwires the same benchPods pods, in the same run, through
// libcni with Debian's reference plugins (ptp with host-local IPAM, from /usr/lib/cni) and with eniwire
// against the real agent on test/ec2sim (warm pool, no cooldown), and reports both sets of p50/p99 and the
// ratio of eniwire's ADD p99 to the reference's, which must be at most 0.5.
// Run it with: go test -run '^$' -bench AddDelVersusReference -benchtime 1x ./test/cnitest
func BenchmarkAddDelVersusReferencePtp(b *testing.B) {
	testenv.RequireRoot(b)
	for _, p := range []string{"ptp", "host-local"} {
		if _, err := os.Stat(filepath.Join(debianPluginDir, p)); err != nil {
			b.Fatalf("the reference plugin %s: %v (apt-get install containernetworking-plugins)", p, err)
		}
	}
	node := NewNode(b, "10.221.255.1")
	agent := StartAgent(b, node, AgentOptions{
		Binary: bins.Agent, InstanceType: "m5.4xlarge", SubnetCIDR: "10.221.0.0/20", WarmIPs: benchPods,
		Env: []string{"IP_COOLDOWN_PERIOD=0s", "MAX_PODS=234"},
	})
	eniwire := deployConflist(b, agent.Socket, "1.0.0", false)
	reference := referenceConflist(b)
	// Each plugin wires its own set of identical fresh namespaces, the two taking turns call by call.
	refPods, pods := newPods(b), newPods(b)
	var refAdds, refDels, adds, dels []time.Duration
	for b.Loop() {
		a, d := addDelAlternating(b, node, wiring{reference, refPods}, wiring{eniwire, pods})
		refAdds, refDels, adds, dels = a[0], d[0], a[1], d[1]
	}
	drainVeths(b, node)
	reportAddDel(b, "ref-", refAdds, refDels)
	reportAddDel(b, "", adds, dels)
	reportAddLaps(b, eniwire, adds)
	b.Logf("ADD p50/p99: eniwire %v/%v, reference %v/%v; DEL p50/p99: eniwire %v/%v, reference %v/%v",
		percentile(adds, 50), percentile(adds, 99), percentile(refAdds, 50), percentile(refAdds, 99),
		percentile(dels, 50), percentile(dels, 99), percentile(refDels, 50), percentile(refDels, 99))
	ratio := float64(percentile(adds, 99)) / float64(percentile(refAdds, 99))
	b.ReportMetric(ratio, "add-p99-vs-ref")
	b.ReportMetric(float64(percentile(dels, 99))/float64(percentile(refDels, 99)), "del-p99-vs-ref")
	if ratio > 0.5 {
		b.Errorf("eniwire's ADD p99 %v is %.2f x the reference's %v, want at most 0.5 x", percentile(adds, 99), ratio,
			percentile(refAdds, 99))
	}
}

// referenceConflist is Debian's ptp with host-local IPAM on a subnet of its own, its leases in a temp dir.
func referenceConflist(b *testing.B) *libcni.NetworkConfigList {
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"reference-ptp-%d","plugins":[{"type":"ptp","mtu":1500,"ipMasq":false,`+
		`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.222.0.0/16"}]],"dataDir":%q}}]}`, os.Getpid(), b.TempDir())
	list, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		b.Fatalf("parsing the reference conflist: %v", err)
	}
	return list
}

func newPods(b *testing.B) []ns.NetNS {
	pods := make([]ns.NetNS, benchPods)
	for i := range pods {
		pods[i] = NewNS(b)
	}
	return pods
}

// wiring is a plugin chain and the pods it wires.
type wiring struct {
	list *libcni.NetworkConfigList
	pods []ns.NetNS
}

// addDelAll ADDs every pod through list, then DELs every pod, and returns each call's time.
func addDelAll(b *testing.B, node ns.NetNS, list *libcni.NetworkConfigList, pods []ns.NetNS) (adds, dels []time.Duration) {
	a, d := addDelAlternating(b, node, wiring{list, pods})
	return a[0], d[0]
}

// addDelAlternating ADDs every pod of every wiring, then DELs them, taking the wirings in turn call by call so
// that a noisy machine slows each alike, and returns each wiring's call times. The wirings have as many pods.
func addDelAlternating(b *testing.B, node ns.NetNS, ws ...wiring) (adds, dels [][]time.Duration) {
	cninet := newLibcni(b)
	ctx := context.Background()
	adds, dels = make([][]time.Duration, len(ws)), make([][]time.Duration, len(ws))
	for _, op := range []struct {
		name  string
		times [][]time.Duration
		call  func(*libcni.NetworkConfigList, *libcni.RuntimeConf) error
	}{
		{"ADD", adds, func(l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
			_, err := cninet.AddNetworkList(ctx, l, rt)
			return err
		}},
		{"DEL", dels, func(l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
			return cninet.DelNetworkList(ctx, l, rt)
		}},
	} {
		for i := range ws[0].pods {
			for w, wr := range ws {
				rt := runtimeConf(fmt.Sprintf("bench-%d", i), wr.pods[i])
				start := time.Now()
				if err := inNode(b, node, func() error { return op.call(wr.list, rt) }); err != nil {
					b.Fatalf("%s %d through %s: %v", op.name, i, wr.list.Name, err)
				}
				op.times[w] = append(op.times[w], time.Since(start))
			}
		}
	}
	return adds, dels
}

// drainVeths waits (off the clock) until the agent has removed the host veths it removes in the background
// after DEL, so the next run does not share the kernel with this one's deletions, and reports how long.
func drainVeths(b *testing.B, node ns.NetNS) {
	drain := time.Now()
	if left := LinksGone(b, node, plumbing.HostVethPrefix, time.Minute); len(left) != 0 {
		b.Errorf("%d host veths left a minute after the last DEL", len(left))
	}
	b.ReportMetric(ms(time.Since(drain)), "veth-drain-ms")
}

// reportAddDel reports the p50 and p99 of ADD and DEL, their metric names prefixed.
func reportAddDel(b *testing.B, prefix string, adds, dels []time.Duration) {
	b.ReportMetric(ms(percentile(adds, 50)), prefix+"add-p50-ms")
	b.ReportMetric(ms(percentile(adds, 99)), prefix+"add-p99-ms")
	b.ReportMetric(ms(percentile(dels, 50)), prefix+"del-p50-ms")
	b.ReportMetric(ms(percentile(dels, 99)), prefix+"del-p99-ms")
}

// peakRSS execs one ADD and one DEL directly (libcni hides the process) and returns the larger max RSS in KiB.
func peakRSS(b *testing.B, node ns.NetNS, socket string) int64 {
	pod := NewNS(b)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"eniwire-rss","type":"eniwire","agentSocket":%q}`, socket)
	var peak int64
	for _, cmd := range []string{"ADD", "DEL"} {
		c := exec.Command(filepath.Join(pluginDir, "eniwire"))
		c.Env = []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=rss", "CNI_NETNS=" + pod.Path(), "CNI_IFNAME=eth0",
			"CNI_PATH=" + pluginDir, "PATH=" + os.Getenv("PATH")}
		c.Stdin = strings.NewReader(conf)
		if err := inNode(b, node, func() error { out, err := c.CombinedOutput(); return wrapOut(err, out) }); err != nil {
			b.Fatalf("%s for RSS: %v", cmd, err)
		}
		peak = max(peak, c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	}
	return peak
}

func wrapOut(err error, out []byte) error {
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
