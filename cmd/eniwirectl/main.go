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
  version   print the version

flags:
  --socket PATH      agent socket (env ENIWIRE_SOCKET, default /run/eniwire/agent.sock)
  --state-dir DIR    journal directory (env ENIWIRE_STATE_DIR, default /var/lib/eniwire)
  --pin-root DIR     BPF pin root (env ENIWIRE_BPF_PIN_ROOT, default /sys/fs/bpf/eniwire/v1)
  --output FORMAT    table or json (default table)
`

// options are the flags every command takes.
type options struct {
	socket, stateDir, pinRoot, output string
}

type command func(opts options, out io.Writer) error

var commands = map[string]command{
	"status":  runStatus,
	"pods":    runPods,
	"enis":    runENIs,
	"journal": runJournal,
	"maps":    runMaps,
	"version": func(_ options, out io.Writer) error { _, err := fmt.Fprintln(out, version.Version); return err },
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
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: want table or json", o.output)
	}
	return cmd(o, out)
}
