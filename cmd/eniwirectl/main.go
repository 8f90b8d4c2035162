// Command eniwirectl shows an operator what eniwire holds on a node: the pool (ENIs, IPs, pods, pending
// operations) from the agent's API, the journal from disk, and the pinned BPF maps, as tables or JSON.
// journal and maps read files directly, so they work while the agent is down.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/internal/version"
)

const usage = `usage: eniwirectl <command> [flags]

commands:
  status    the pool as the agent holds it: ENIs, IP counts, pods, pending operations (agent socket)
  pods      the pods' assignments: IP, ENI, host veth (agent socket)
  enis      the ENIs in the agent's books with their state and IPs (agent socket)
  journal   the journal on disk: ENI operations, assignments, cooldowns (works while the agent is down)
  maps      the pinned BPF maps decoded: pods, ENIs, routes, counters (works while the agent is down)
  policy    POD: the NetworkPolicy rules compiled for a pod of the node, NAMESPACE/NAME (agent socket)
  max-pods  what kubelet's --max-pods should be for an instance type (offline for the types it ships facts of)
  version   print the version

flags:
  --socket PATH      agent socket (env ENIWIRE_SOCKET, default /run/eniwire/agent.sock)
  --state-dir DIR    journal directory (env ENIWIRE_STATE_DIR, default /var/lib/eniwire)
  --pin-root DIR     BPF pin root (env ENIWIRE_BPF_PIN_ROOT, default /sys/fs/bpf/eniwire/v1)
  --output FORMAT    table or json (default table)

policy flags:
  --explain FLOW     whether a flow is allowed, and by which policy: 'from|to ADDRESS [tcp|udp|sctp|icmp[/PORT]]',
                     e.g. 'from 10.0.1.5 tcp/8080' (ingress to the pod's port) or 'to 10.0.2.9 udp/53' (egress)

max-pods flags:
  --instance-type T     the type (default: the one the agent cached in --state-dir)
  --prefix-delegation   count /28 prefixes (16 addresses a slot) on Nitro types
  --custom-networking   the primary ENI carries no pods (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG)
  --max-eni N           count at most N ENIs (MAX_ENI)
  --show-max-allowed    print what the ENIs can address, without the 110/250 ceiling
  --from-ec2            read the type's facts from EC2 (DescribeInstanceTypes), not the shipped ones
  --all                 every shipped type in every mode (secondary IPs, prefixes, custom networking)
`

// options are the flags every command takes.
type options struct {
	socket, stateDir, pinRoot, output string
	// policy: the pod, and --explain's flow
	args    []string
	explain string
	// max-pods
	instanceType                               string
	prefixes, showMaxAllowed, customNetworking bool
	fromEC2, all                               bool
	maxENI                                     int
}

type command func(opts options, out io.Writer) error

var commands = map[string]command{
	"status":   runStatus,
	"pods":     runPods,
	"enis":     runENIs,
	"journal":  runJournal,
	"maps":     runMaps,
	"policy":   runPolicy,
	"max-pods": runMaxPods,
	"version":  func(_ options, out io.Writer) error { _, err := fmt.Fprintln(out, version.Version); return err },
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "eniwirectl:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command")
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	fs := flag.NewFlagSet("eniwirectl "+args[0], flag.ContinueOnError)
	var o options
	fs.StringVar(&o.socket, "socket", env("ENIWIRE_SOCKET", api.DefaultSocket), "agent socket")
	fs.StringVar(&o.stateDir, "state-dir", env("ENIWIRE_STATE_DIR", "/var/lib/eniwire"), "journal directory")
	fs.StringVar(&o.pinRoot, "pin-root", env("ENIWIRE_BPF_PIN_ROOT", datapath.DefaultPinRoot), "BPF pin root")
	fs.StringVar(&o.output, "output", "table", "table or json")
	fs.StringVar(&o.instanceType, "instance-type", "", "instance type (max-pods)")
	fs.BoolVar(&o.prefixes, "prefix-delegation", false, "count /28 prefixes (max-pods)")
	fs.IntVar(&o.maxENI, "max-eni", 0, "MAX_ENI (max-pods)")
	fs.BoolVar(&o.customNetworking, "custom-networking", false, "the primary ENI carries no pods (max-pods)")
	fs.BoolVar(&o.showMaxAllowed, "show-max-allowed", false, "no 110/250 ceiling (max-pods)")
	fs.BoolVar(&o.fromEC2, "from-ec2", false, "the type's facts from DescribeInstanceTypes (max-pods)")
	fs.BoolVar(&o.all, "all", false, "every shipped type in every mode (max-pods)")
	fs.StringVar(&o.explain, "explain", "", "a flow to explain (policy)")
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	// A command's arguments may come before, between or after its flags (eniwirectl policy shop/web --explain ...).
	for rest := args[1:]; ; {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		o.args, rest = append(o.args, fs.Arg(0)), fs.Args()[1:]
	}
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: want table or json", o.output)
	}
	return cmd(o, out)
}
