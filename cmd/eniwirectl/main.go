// Command eniwirectl shows an operator what the node agent holds: the pool (ENIs, IPs, pods, pending
// operations) from the agent's API, and the journal from disk, as tables or JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/internal/version"
)

const usage = `usage: eniwirectl <command> [flags]

commands:
  status    the pool as the agent holds it: ENIs, IP counts, pods, pending operations (from the agent socket)
  journal   the journal on disk: ENI operations, assignments, cooldowns (works while the agent is down)
  version   print the version

flags:
  --socket PATH      agent socket (env ENIWIRE_SOCKET, default /run/eniwire/agent.sock)
  --state-dir DIR    journal directory (env ENIWIRE_STATE_DIR, default /var/lib/eniwire)
  --output FORMAT    table or json (default table)
`

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
		return fmt.Errorf("no command")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("eniwirectl "+cmd, flag.ContinueOnError)
	socket := fs.String("socket", env("ENIWIRE_SOCKET", api.DefaultSocket), "agent socket")
	stateDir := fs.String("state-dir", env("ENIWIRE_STATE_DIR", "/var/lib/eniwire"), "journal directory")
	output := fs.String("output", "table", "table or json")
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("--output %q: want table or json", *output)
	}
	switch cmd {
	case "status":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := api.NewClient(*socket)
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		pods, err := c.Assignments(ctx)
		if err != nil {
			return err
		}
		if *output == "json" {
			return writeJSON(out, struct {
				Status      *api.Status      `json:"status"`
				Assignments []api.Assignment `json:"assignments"`
			}{st, pods})
		}
		return printStatus(out, st, pods)
	case "journal":
		st, recovered, err := journal.Read(filepath.Join(*stateDir, journal.FileName))
		if err != nil {
			return err
		}
		if *output == "json" {
			return writeJSON(out, st)
		}
		return printJournal(out, st, recovered)
	case "version":
		_, err := fmt.Fprintln(out, version.Version)
		return err
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(out io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0) }

func printStatus(out io.Writer, s *api.Status, pods []api.Assignment) error {
	ready := "yes"
	if !s.Ready {
		ready = "no (" + s.Reason + ")"
	}
	fmt.Fprintf(out, "instance %s (%s)  ready: %s\nlimits: %d ENIs, %d IPs per ENI\nIPs: %d assigned, %d warm, %d cooldown\n",
		s.InstanceID, s.InstanceType, ready, s.MaxENIs, s.IPsPerENI, s.Assigned, s.Warm, s.Cooldown)
	if s.PoolStatus != "" {
		fmt.Fprintf(out, "pool: %s\n", s.PoolStatus)
	}
	fmt.Fprintln(out)
	tw := table(out)
	fmt.Fprintln(tw, "ENI\tDEVICE\tSTATE\tPRIMARY\tDELETE-ON-TERM\tSUBNET\tIPS\tASSIGNED\tWARM\tCOOLDOWN")
	for _, e := range s.ENIs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%v\t%v\t%s\t%d\t%d\t%d\t%d\n", dash(e.ID), e.DeviceIndex, e.State, e.Primary,
			e.DeleteOnTermination, dash(e.SubnetCIDR), len(e.IPs), e.Assigned, e.Warm, e.Cooldown)
	}
	tw.Flush()
	if len(s.Pending) > 0 {
		fmt.Fprintln(out)
		tw = table(out)
		fmt.Fprintln(tw, "PENDING OP\tENI\tSTATE\tSINCE\tLAST ERROR")
		for _, p := range s.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.OpID, dash(p.ENI), p.State, p.Since.UTC().Format(time.RFC3339), dash(p.Error))
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
	tw = table(out)
	fmt.Fprintln(tw, "POD\tCONTAINER\tIFNAME\tIP\tENI\tHOST VETH\tASSIGNED AT")
	for _, a := range pods {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(strings.Trim(a.Pod.Namespace+"/"+a.Pod.Name, "/")), short(a.ContainerID),
			a.IfName, a.IP, a.ENI, dash(a.HostVeth), a.AssignedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func printJournal(out io.Writer, st *journal.State, recovered bool) error {
	fmt.Fprintf(out, "journal v%d, seq %d, instance %s", st.Version, st.Seq, dash(st.InstanceID))
	if recovered {
		fmt.Fprint(out, " (torn tail ignored: last good state shown)")
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
	tw := table(out)
	fmt.Fprintln(tw, "OP\tENI\tSTATE\tSTEP\tDEVICE\tATTACHMENT\tDOT\tIPS\tCLIENT TOKEN\tSINCE\tATTEMPTS\tLAST ERROR")
	for _, e := range st.ENIs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%v\t%d\t%s\t%s\t%d\t%s\n", e.OpID, dash(e.ID), e.State, dash(string(e.ReleaseStep)),
			e.DeviceIndex, dash(e.AttachmentID), e.DeleteOnTermination, len(e.IPs), dash(e.ClientToken),
			e.Since.UTC().Format(time.RFC3339), e.Attempts, dash(e.LastError))
	}
	tw.Flush()
	if len(st.IPOps) > 0 {
		fmt.Fprintln(out)
		tw = table(out)
		fmt.Fprintln(tw, "IP OP\tKIND\tENI\tCOUNT\tIPS\tSINCE")
		for _, op := range st.IPOps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", op.OpID, op.Kind, op.ENI, op.Count, dash(strings.Join(op.IPs, ",")), op.Since.UTC().Format(time.RFC3339))
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
	tw = table(out)
	fmt.Fprintln(tw, "CONTAINER\tIFNAME\tPOD\tUID\tNETNS\tIP\tENI\tASSIGNED AT")
	for _, a := range st.Assignments {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short(a.ContainerID), a.IfName, dash(strings.Trim(a.PodNamespace+"/"+a.PodName, "/")),
			dash(a.PodUID), dash(a.Netns), a.IP, a.ENI, a.AssignedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
	if len(st.Cooldowns) > 0 {
		fmt.Fprintln(out)
		tw = table(out)
		fmt.Fprintln(tw, "COOLDOWN IP\tENI\tUNTIL")
		for _, c := range st.Cooldowns {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", c.IP, c.ENI, c.Until.UTC().Format(time.RFC3339))
		}
		tw.Flush()
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
