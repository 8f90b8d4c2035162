package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
)

// prefixPods bounds the pods the prefix chapter adds before one gets an address of a /28 prefix.
const prefixPods = 8

// prefixMode restarts the agent with ENABLE_PREFIX_DELEGATION=true, as an operator turns it on: the pods keep
// their secondary IPs, the next room comes as a /28 prefix, and pods are added until one gets an address of
// it. Every pod then talks again, and eniwirectl enis shows a row per prefix.
func (st *story) prefixMode(ctx context.Context) error {
	n, s := st.n, st.s
	s.heading("Prefix delegation turned on: the next room comes as /28 prefixes")
	if err := n.Agent.Stop(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping the agent: %w", err)
	}
	n.Agent.SetEnv("ENABLE_PREFIX_DELEGATION=true")
	t0 := time.Now()
	if err := n.StartAgent(ctx, 1); err != nil {
		return fmt.Errorf("restarting the agent in prefix mode: %w", err)
	}
	s.say("agent restarted with ENABLE_PREFIX_DELEGATION=true (pid %d), ready in %s; the pods keep their IPs",
		n.Agent.PID(), time.Since(t0).Round(time.Millisecond))
	for range prefixPods {
		if err := st.addPods(ctx, len(st.pods)+1, ""); err != nil {
			return err
		}
		stat, err := n.Agent.Status(ctx)
		if err != nil {
			return err
		}
		if p := st.pods[len(st.pods)-1]; prefixOf(stat, p.IP.String()) != "" {
			st.res.PrefixPod = p.Name
			s.say("%s got %s from prefix %s of %s", p.Name, p.IP, prefixOf(stat, p.IP.String()), p.ENI)
			break
		}
	}
	if st.res.PrefixPod == "" {
		return fmt.Errorf("%d more pods and none got an address of a prefix", prefixPods)
	}
	s.heading("Traffic again, every pod (secondary IPs and prefix addresses alike)")
	if err := st.traffic(ctx); err != nil {
		return err
	}
	return nil
}

// prefixOf returns the prefix of the books that holds ip, or "".
func prefixOf(stat *api.Status, ip string) string {
	for _, e := range stat.ENIs {
		for _, p := range e.Prefixes {
			if journal.Covers(p.CIDR, ip) {
				return p.CIDR
			}
		}
	}
	return ""
}
