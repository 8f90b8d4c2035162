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
	var c calls
	for b.Loop() {
		c = addDelAll(b, node, list, pods)
	}
	drainVeths(b, node)
	reportAddDel(b, "", c)
	b.ReportMetric(float64(peakRSS(b, node, socket)), "plugin-peak-rss-KiB")
	for _, op := range []struct {
		name string
		d    []time.Duration
	}{{"ADD", c.adds}, {"DEL", c.dels}} {
		if p99 := percentile(op.d, 99); p99 > 50*time.Millisecond {
			b.Logf("%s p99 %v is over the 50 ms target", op.name, p99)
		}
	}
}

// BenchmarkAddDelVersusReferencePtp wires and unwires the same benchPods pods, in the same run, through
// libcni with Debian's reference plugins (ptp with host-local IPAM, from /usr/lib/cni), with eniwire against
// the real agent on test/ec2sim (warm pool, no cooldown) and with floorplugin, a Go plugin that does nothing;
// it reports each one's p50/p99 and CPU per ADD, and the ratio of eniwire's ADD p99 to the reference's, which
// must be at most 0.5. The floor is what exec, the Go runtime's start and exit and libcni cost on this machine
// before a plugin does any work.
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
	reference, floor := referenceConflist(b), floorConflist(b)
	// Each plugin wires its own set of identical fresh namespaces, the three taking turns call by call.
	ws := []wiring{{reference, newPods(b)}, {eniwire, newPods(b)}, {floor, newPods(b)}}
	var ref, eni, flo calls
	for b.Loop() {
		c := addDelAlternating(b, node, ws...)
		ref, eni, flo = c[0], c[1], c[2]
	}
	drainVeths(b, node)
	reportAddDel(b, "ref-", ref)
	reportAddDel(b, "", eni)
	reportAddDel(b, "floor-", flo)
	reportAddLaps(b, eniwire, eni.adds)
	b.Logf("ADD p50/p99 and CPU per ADD p50: eniwire %v/%v %v, reference %v/%v %v, a Go plugin that does nothing %v/%v %v (%.2f x the reference at p50)",
		percentile(eni.adds, 50), percentile(eni.adds, 99), percentile(eni.addCPU, 50),
		percentile(ref.adds, 50), percentile(ref.adds, 99), percentile(ref.addCPU, 50),
		percentile(flo.adds, 50), percentile(flo.adds, 99), percentile(flo.addCPU, 50),
		float64(percentile(flo.adds, 50))/float64(percentile(ref.adds, 50)))
	b.Logf("DEL p50/p99: eniwire %v/%v, reference %v/%v", percentile(eni.dels, 50), percentile(eni.dels, 99),
		percentile(ref.dels, 50), percentile(ref.dels, 99))
	ratio := float64(percentile(eni.adds, 99)) / float64(percentile(ref.adds, 99))
	b.ReportMetric(ratio, "add-p99-vs-ref")
	b.ReportMetric(float64(percentile(eni.adds, 50))/float64(percentile(ref.adds, 50)), "add-p50-vs-ref")
	b.ReportMetric(float64(percentile(flo.adds, 50))/float64(percentile(ref.adds, 50)), "floor-add-p50-vs-ref")
	b.ReportMetric(float64(percentile(eni.dels, 99))/float64(percentile(ref.dels, 99)), "del-p99-vs-ref")
	if ratio > 0.5 {
		b.Errorf("eniwire's ADD p99 %v is %.2f x the reference's %v, want at most 0.5 x", percentile(eni.adds, 99), ratio,
			percentile(ref.adds, 99))
	}
}

// referenceConflist is Debian's ptp with host-local IPAM on a subnet of its own, its leases in a temp dir.
func referenceConflist(b *testing.B) *libcni.NetworkConfigList {
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"reference-ptp-%d","plugins":[{"type":"ptp","mtu":1500,"ipMasq":false,`+
		`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.222.0.0/16"}]],"dataDir":%q}}]}`, os.Getpid(), b.TempDir())
	return confList(b, conf)
}

// floorConflist builds floorplugin into the plugin dir as the image's binaries are built (static, -s -w) and
// returns a conflist that runs it.
func floorConflist(b *testing.B) *libcni.NetworkConfigList {
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(pluginDir, "eniwire-floor"), "./floorplugin")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building floorplugin: %v\n%s", err, out)
	}
	return confList(b, fmt.Sprintf(`{"cniVersion":"1.0.0","name":"floor-%d","plugins":[{"type":"eniwire-floor"}]}`, os.Getpid()))
}

func confList(b *testing.B, conf string) *libcni.NetworkConfigList {
	list, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		b.Fatalf("parsing conflist %s: %v", conf, err)
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

// calls are the times of one wiring's ADDs and DELs, and the CPU its plugins used per ADD (children's user and
// system time, reaped grandchildren included).
type calls struct {
	adds, dels, addCPU []time.Duration
}

// addDelAll ADDs every pod through list, then DELs every pod, and returns each call's time.
func addDelAll(b *testing.B, node ns.NetNS, list *libcni.NetworkConfigList, pods []ns.NetNS) calls {
	return addDelAlternating(b, node, wiring{list, pods})[0]
}

// addDelAlternating ADDs every pod of every wiring, then DELs them, taking the wirings in turn call by call so
// that a noisy machine slows each alike, and returns each wiring's calls. The wirings have as many pods.
func addDelAlternating(b *testing.B, node ns.NetNS, ws ...wiring) []calls {
	cninet := newLibcni(b)
	ctx := context.Background()
	out := make([]calls, len(ws))
	for _, op := range []string{"ADD", "DEL"} {
		for i := range ws[0].pods {
			for w, wr := range ws {
				rt := runtimeConf(fmt.Sprintf("bench-%d", i), wr.pods[i])
				before := childrenCPU(b)
				start := time.Now()
				err := inNode(b, node, func() error {
					if op == "DEL" {
						return cninet.DelNetworkList(ctx, wr.list, rt)
					}
					_, err := cninet.AddNetworkList(ctx, wr.list, rt)
					return err
				})
				took := time.Since(start)
				if err != nil {
					b.Fatalf("%s %d through %s: %v", op, i, wr.list.Name, err)
				}
				if op == "DEL" {
					out[w].dels = append(out[w].dels, took)
					continue
				}
				out[w].adds = append(out[w].adds, took)
				out[w].addCPU = append(out[w].addCPU, childrenCPU(b)-before)
			}
		}
	}
	return out
}

// childrenCPU is the user and system time of this process's reaped children so far.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// reportAddDel reports the p50 and p99 of ADD and DEL and the p50 of CPU per ADD, their metric names prefixed.
func reportAddDel(b *testing.B, prefix string, c calls) {
	b.ReportMetric(ms(percentile(c.adds, 50)), prefix+"add-p50-ms")
	b.ReportMetric(ms(percentile(c.adds, 99)), prefix+"add-p99-ms")
	b.ReportMetric(ms(percentile(c.addCPU, 50)), prefix+"add-cpu-p50-ms")
	b.ReportMetric(ms(percentile(c.dels, 50)), prefix+"del-p50-ms")
	b.ReportMetric(ms(percentile(c.dels, 99)), prefix+"del-p99-ms")
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
