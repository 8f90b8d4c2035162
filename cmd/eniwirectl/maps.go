package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/eniwire/eniwire/datapath"
)

// mapsView is the decoded content of the pinned maps.
type mapsView struct {
	Pods     []datapath.Pod        `json:"pods"`
	ENIs     []datapath.ENI        `json:"enis"`
	Routes   []datapath.Route      `json:"routes"`
	Counters []counterView         `json:"counters"`
	Traffic  []datapath.PodTraffic `json:"podTraffic"`
}

type counterView struct {
	Program string `json:"program"`
	Verdict string `json:"verdict"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

func readMaps(pinRoot string) (*mapsView, error) {
	r, err := datapath.OpenPinnedReadOnly(pinRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no eniwire maps pinned under %s (is the agent running with the bpf datapath, or was it uninstalled?): %w", pinRoot, err)
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var v mapsView
	if v.Pods, err = r.Pods(); err != nil {
		return nil, err
	}
	if v.ENIs, err = r.ENIs(); err != nil {
		return nil, err
	}
	if v.Routes, err = r.Routes(); err != nil {
		return nil, err
	}
	counters, err := r.Counters()
	if err != nil {
		return nil, err
	}
	for _, c := range counters {
		v.Counters = append(v.Counters, counterView{Program: c.Verdict.Program(), Verdict: c.Verdict.String(), Packets: c.Packets, Bytes: c.Bytes})
	}
	if v.Traffic, err = r.PodTraffic(); err != nil {
		return nil, err
	}
	return &v, nil
}

func runMaps(o options, out io.Writer) error {
	v, err := readMaps(o.pinRoot)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(out, v)
	}
	return printMaps(out, v)
}

func printMaps(out io.Writer, v *mapsView) error {
	var pods, enis, routes, counters [][]any
	for _, p := range v.Pods {
		pods = append(pods, []any{p.IP, p.HostIfindex, p.ENIIfindex, fmt.Sprintf("%#x", p.Flags)})
	}
	for _, e := range v.ENIs {
		enis = append(enis, []any{e.Ifindex, e.MAC, e.Gateway, e.Subnet})
	}
	for _, r := range v.Routes {
		routes = append(routes, []any{r.Prefix, r.Kind})
	}
	for _, c := range v.Counters {
		counters = append(counters, []any{c.Program, c.Verdict, c.Packets, c.Bytes})
	}
	for i, t := range []struct {
		header string
		rows   [][]any
	}{
		{"POD IP\tHOST IFINDEX\tENI IFINDEX\tFLAGS", pods},
		{"ENI IFINDEX\tMAC\tGATEWAY\tSUBNET", enis},
		{"ROUTE\tKIND", routes},
		{"PROGRAM\tVERDICT\tPACKETS\tBYTES", counters},
	} {
		if i > 0 {
			fmt.Fprintln(out)
		}
		tw := table(out)
		fmt.Fprintln(tw, t.header)
		for _, row := range t.rows {
			for j, cell := range row {
				if j > 0 {
					fmt.Fprint(tw, "\t")
				}
				fmt.Fprint(tw, cell)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
