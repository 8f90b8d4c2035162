package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/eniwire/eniwire/test/simnode"
)

const (
	echoPort = 8080
	// modifyAction is the call the crash interrupts: setting DeleteOnTermination, the commit's last step.
	modifyAction = "ModifyNetworkInterfaceAttribute"
	throttleCode = "RequestLimitExceeded"
	// firstPods fill the primary ENI (9 addresses for pods on an m5.large) and spill onto a second.
	firstPods = 12
	maxPods   = 24
)

// result is what the story establishes, for its test.
type result struct {
	ENIs          int // distinct ENIs the pods use at the end
	BooksAfter    simnode.Books
	FlowExchanges int
	TrafficErrors int
	Pods          int
	// PrefixPod is the first pod that got an address of a /28 prefix once prefix mode was turned on.
	PrefixPod string
}

// story is the demo: one simulated node, pods through libcni, traffic, a crash in the middle of an ENI
// allocation under throttling, and the books checked against EC2 after the restart.
type story struct {
	n      *simnode.Node
	s      *screen
	pods   []*simnode.Pod
	vpc    netip.AddrPort
	echoes []*simnode.Echo
	res    result
}

func (st *story) run(ctx context.Context) error {
	n, s := st.n, st.s
	s.heading("A simulated VPC in network namespaces")
	router, _ := n.Fabric.Router()
	vh := n.Fabric.VPCHost()
	s.say("EC2 + IMDS simulator (in-process) with one %s instance %s", n.Instance.Type, n.Instance.ID)
	s.say("node netns      %s  (primary ENI %s, %s)", n.Netns.Netns, n.Instance.PrimaryENI, n.Instance.PrimaryIP)
	s.say("VPC router      %s  (one veth per ENI, EC2's source/dest check)", router)
	s.say("VPC host        %s  %s (TCP+UDP echo on :%d)", vh.Netns, vh.IP, echoPort)
	st.vpc = netip.AddrPortFrom(vh.IP, echoPort)
	if err := st.echo(vh.NetnsPath, st.vpc); err != nil {
		return err
	}

	s.heading("The agent on the node (BPF datapath, journal, agent API)")
	t0 := time.Now()
	if err := n.StartAgent(ctx, 1); err != nil {
		return fmt.Errorf("starting the agent: %w", err)
	}
	s.say("eniwire-agent pid %d ready in %s; it installed the CNI plugin and conflist into %s", n.Agent.PID(),
		time.Since(t0).Round(time.Millisecond), n.ConfDir)

	s.heading(fmt.Sprintf("%d pods through the CNI plugin, via libcni as a runtime calls it", firstPods))
	if err := st.addPods(ctx, firstPods, ""); err != nil {
		return err
	}
	s.say("%d pods on %d ENIs", len(st.pods), st.eniCount())

	s.heading("Traffic: pod -> VPC host (TCP and UDP) and pod -> pod")
	if err := st.traffic(ctx); err != nil {
		return err
	}

	s.heading("eniwirectl status")
	if err := st.ctl(ctx, 30, "status"); err != nil {
		return err
	}
	s.heading("The pinned pods map, as bpftool shows it")
	pods := filepath.Join(n.PinRoot, "maps", "pods")
	out, err := exec.CommandContext(ctx, "bpftool", "map", "dump", "pinned", pods).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dumping the pods map: %w: %s", err, out)
	}
	s.block("bpftool map dump pinned "+pods, string(out), 24)
	s.heading("A few metrics from the agent's /metrics")
	if err := st.metrics(ctx); err != nil {
		return err
	}

	if err := st.crash(ctx); err != nil {
		return err
	}

	s.heading("More pods, until one lands on the third ENI")
	if err := st.addPods(ctx, maxPods, "third"); err != nil {
		return err
	}
	s.say("%d pods on %d ENIs", len(st.pods), st.eniCount())
	s.heading("Traffic again, every pod")
	if err := st.traffic(ctx); err != nil {
		return err
	}
	if err := st.prefixMode(ctx); err != nil {
		return err
	}
	if err := st.ctl(ctx, 12, "enis"); err != nil {
		return err
	}
	st.res.ENIs, st.res.Pods = st.eniCount(), len(st.pods)
	return nil
}

func (st *story) echo(nsPath string, addr netip.AddrPort) error {
	e, err := simnode.StartEcho(nsPath, addr)
	if err != nil {
		return err
	}
	st.echoes = append(st.echoes, e)
	return nil
}

func (st *story) closeEchoes() {
	for _, e := range st.echoes {
		_ = e.Close()
	}
	st.echoes = nil
}

// addPods adds pods up to total; with until "third" it stops early once a pod lands on device index 2.
func (st *story) addPods(ctx context.Context, total int, until string) error {
	for len(st.pods) < total {
		p, err := st.n.AddPod(ctx, fmt.Sprintf("pod%02d", len(st.pods)+1))
		if err != nil {
			return err
		}
		st.pods = append(st.pods, p)
		if err := st.echo(p.NetnsPath, netip.AddrPortFrom(p.IP, echoPort)); err != nil {
			return err
		}
		st.s.say("%-6s %-12s %s (device %d)", p.Name, p.IP, p.ENI, p.DeviceIndex)
		if until == "third" && p.DeviceIndex == 2 {
			return nil
		}
	}
	if until == "third" {
		return fmt.Errorf("%d pods and none on the third ENI", len(st.pods))
	}
	return nil
}

func (st *story) eniCount() int {
	var ids []string
	for _, p := range st.pods {
		if !slices.Contains(ids, p.ENI) {
			ids = append(ids, p.ENI)
		}
	}
	return len(ids)
}

// traffic checks every pod: TCP to the VPC host (source address kept, and which ENI it left through by the
// router's counters), UDP to the VPC host, and TCP to the next pod.
func (st *story) traffic(ctx context.Context) error {
	var rows [][]string
	for i, p := range st.pods {
		row := []string{p.Name, p.IP.String(), p.ENI, fmt.Sprint(p.DeviceIndex)}
		exit, seen, err := st.n.ExitENI(ctx, p, st.vpc, 10)
		switch {
		case err != nil:
			row = append(row, "FAIL "+short(err), "-")
			st.res.TrafficErrors++
		case seen != p.IP || exit != p.ENI:
			row = append(row, fmt.Sprintf("WRONG: seen as %s", seen), exit)
			st.res.TrafficErrors++
		default:
			row = append(row, "ok, seen as itself", exit)
		}
		if seen, err := simnode.TalkUDP(ctx, p.NetnsPath, st.vpc); err != nil || seen != p.IP {
			row = append(row, fmt.Sprintf("FAIL %v %v", seen, short(err)))
			st.res.TrafficErrors++
		} else {
			row = append(row, "ok")
		}
		peer := st.pods[(i+1)%len(st.pods)]
		if seen, err := simnode.Talk(ctx, p.NetnsPath, netip.AddrPortFrom(peer.IP, echoPort), 3); err != nil || seen != p.IP {
			row = append(row, fmt.Sprintf("%s FAIL %v", peer.Name, short(err)))
			st.res.TrafficErrors++
		} else {
			row = append(row, peer.Name+" ok")
		}
		rows = append(rows, row)
	}
	st.s.table([]string{"POD", "IP", "ENI", "DEV", "TCP -> VPC HOST", "LEFT THROUGH", "UDP", "TCP -> POD"}, rows)
	if st.res.TrafficErrors > 0 {
		return fmt.Errorf("%d traffic checks failed", st.res.TrafficErrors)
	}
	return nil
}

func short(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// ctl runs the built eniwirectl against the agent.
func (st *story) ctl(ctx context.Context, max int, args ...string) error {
	full := append(args, "--socket", st.n.Agent.Socket(), "--state-dir", st.n.Agent.StateDir(), "--pin-root", st.n.PinRoot)
	out, err := exec.CommandContext(ctx, st.n.Bins.Ctl, full...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("running eniwirectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	st.s.block("eniwirectl "+strings.Join(args, " "), string(out), max)
	return nil
}

func (st *story) metrics(ctx context.Context) error {
	lines, err := st.n.Agent.MetricLines(ctx, "eniwire_ec2_calls_total", "eniwire_ec2_throttled_total",
		"eniwire_datapath_packets_total", "eniwire_enis{", "eniwire_ips{")
	if err != nil {
		return err
	}
	var keep []string
	for _, l := range lines {
		if !strings.HasSuffix(l, " 0") {
			keep = append(keep, l)
		}
	}
	st.s.block("curl "+simnode.MetricsURL+"/metrics (non-zero samples)", strings.Join(keep, "\n"), 30)
	return nil
}

// books prints the books-vs-EC2 table.
func (st *story) books(ctx context.Context) (simnode.Books, error) {
	b, err := st.n.CompareBooks(ctx)
	if err != nil {
		return b, err
	}
	var rows [][]string
	for _, r := range b.Rows {
		rows = append(rows, []string{r.ID, fmt.Sprint(r.DeviceIndex), or(r.AgentState, "-"), fmt.Sprint(r.AgentDoT),
			or(r.EC2Status, "-"), fmt.Sprint(r.EC2DoT), fmt.Sprint(r.Ours)})
	}
	st.s.table([]string{"ENI", "DEV", "AGENT'S BOOKS", "DoT (BOOKS)", "EC2", "DoT (EC2)", "OUR TAG"}, rows)
	st.s.say("leaked (ours in EC2, not in the books): %s", list(b.Leaked))
	st.s.say("lost (in the books, not attached in EC2): %s", list(b.Lost))
	return b, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func list(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// errBooks is returned when the books and EC2 disagree at the end.
var errBooks = errors.New("the agent's books do not match EC2")

func startFlow(ctx context.Context, st *story, p *simnode.Pod) (*simnode.Flow, error) {
	f, err := simnode.StartFlow(ctx, p.NetnsPath, st.vpc)
	if err != nil {
		return nil, fmt.Errorf("opening a TCP flow from %s: %w", p.Name, err)
	}
	if err := f.WaitMore(ctx, 10); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

// explore prints how to look around the running demo and how to clean up.
func (st *story) explore() {
	n, s := st.n, st.s
	router, _ := n.Fabric.Router()
	s.say("network namespaces (ip netns list | grep %s):", n.Name)
	s.say("  node      %s", n.Netns.Netns)
	s.say("  router    %s", router)
	s.say("  VPC host  %s (%s, echo on :%d)", n.Fabric.VPCHost().Netns, n.Fabric.VPCHost().IP, echoPort)
	s.say("  pods      %s-p-pod01 ... %s-p-pod%02d", n.Name, n.Name, len(st.pods))
	s.say("look around (as root, in another terminal):")
	flags := fmt.Sprintf("--socket %s --state-dir %s --pin-root %s", n.Agent.Socket(), n.Agent.StateDir(), n.PinRoot)
	s.say("  %s status %s", n.Bins.Ctl, flags)
	s.say("  %s pods|enis|journal|maps %s", n.Bins.Ctl, flags)
	s.say("  bpftool map dump pinned %s/maps/pods", n.PinRoot)
	s.say("  ip netns exec %s ip -br addr; ip netns exec %s ip rule; ip netns exec %s nft list ruleset", n.Netns.Netns, n.Netns.Netns, n.Netns.Netns)
	s.say("  ip netns exec %s curl -s %s/metrics | grep ^eniwire_", n.Netns.Netns, simnode.MetricsURL)
	s.say("  ip netns exec %s-p-pod01 nc %s %d", n.Name, n.Fabric.VPCHost().IP, echoPort)
	s.say("  agent log: %s", n.Agent.LogPath)
	s.say("clean up: Ctrl-C here (the simulator lives in this process); if it was killed instead:")
	s.say("  sudo go run ./test/demo -clean")
}
