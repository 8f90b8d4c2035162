package snat

import (
	"context"
	"fmt"
	"strings"
)

// iptablesRestore rewrites ENIWIRE-SNAT in one iptables-restore --noflush transaction; declaring the chain
// flushes it, and nothing else in the nat table is touched.
func iptablesRestore(cfg Config) string {
	var b strings.Builder
	b.WriteString("*nat\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n", iptChain)
	if cfg.EgressCIDR.IsValid() {
		fmt.Fprintf(&b, "-A %s -o %s -s %s -m addrtype ! --dst-type LOCAL -m comment --comment %q -j SNAT --to-source %s%s\n",
			iptChain, cfg.PrimaryInterface, cfg.EgressCIDR.Masked(), egressComment, cfg.PrimaryIP, iptRandom(cfg.Randomize))
	}
	if cfg.External {
		b.WriteString("COMMIT\n")
		return b.String()
	}
	for _, p := range cfg.ExcludeCIDRs {
		fmt.Fprintf(&b, "-A %s -d %s -m comment --comment \"eniwire: excluded\" -j RETURN\n", iptChain, p.Masked())
	}
	fmt.Fprintf(&b, "-A %s -o %s ! -s %s -m addrtype ! --dst-type LOCAL -m comment --comment \"eniwire: pods leaving the VPC\" -j SNAT --to-source %s%s\n",
		iptChain, cfg.PrimaryInterface, cfg.PrimaryIP, cfg.PrimaryIP, iptRandom(cfg.Randomize))
	b.WriteString("COMMIT\n")
	return b.String()
}

func iptRandom(r Randomize) string {
	switch r {
	case RandomizePRNG:
		return " --random-fully"
	case RandomizeHash:
		return " --random"
	}
	return ""
}

var iptJump = []string{"POSTROUTING", "-m", "comment", "--comment", iptJumpMarker, "-j", iptChain}

func applyIPTables(ctx context.Context, cfg Config) error {
	if _, err := run(ctx, iptablesRestore(cfg), "iptables-restore", "-w", "--noflush"); err != nil {
		return err
	}
	if _, err := run(ctx, "", "iptables", append([]string{"-w", "-t", "nat", "-C"}, iptJump...)...); err == nil {
		return nil
	}
	_, err := run(ctx, "", "iptables", append([]string{"-w", "-t", "nat", "-A"}, iptJump...)...)
	return err
}

func removeIPTables(ctx context.Context) error {
	// Look first with iptables-save, which changes nothing: iptables-nft would create the nat table and
	// its base chains just to be told to delete a rule from them.
	saved, err := run(ctx, "", "iptables-save", "-t", "nat")
	if err != nil || !strings.Contains(saved, iptChain) {
		return nil
	}
	// Delete every copy of the jump (a crashed older agent may have added two), then the chain.
	for range 16 {
		if _, err := run(ctx, "", "iptables", append([]string{"-w", "-t", "nat", "-D"}, iptJump...)...); err != nil {
			break
		}
	}
	if _, err := run(ctx, "", "iptables", "-w", "-t", "nat", "-F", iptChain); err != nil {
		return err
	}
	_, err = run(ctx, "", "iptables", "-w", "-t", "nat", "-X", iptChain)
	return err
}
