package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
)

func runJournal(o options, out io.Writer) error {
	st, recovered, err := journal.Read(filepath.Join(o.stateDir, journal.FileName))
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(out, st)
	}
	return printJournal(out, st, recovered)
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
