package snat

import (
	"context"
	"fmt"
	"strings"
)

// nftScript replaces the whole eniwire table in one transaction: creating it first makes the delete
// valid when it does not exist yet, so packets never see a half-written chain.
func nftScript(cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {}\ndelete table ip %s\n", nftTable, nftTable)
	fmt.Fprintf(&b, "table ip %s {\n", nftTable)
	b.WriteString("\tset excluded {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\tauto-merge\n")
	if len(cfg.ExcludeCIDRs) > 0 {
		elems := make([]string, len(cfg.ExcludeCIDRs))
		for i, p := range cfg.ExcludeCIDRs {
			elems[i] = p.Masked().String()
		}
		fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(elems, ", "))
	}
	b.WriteString("\t}\n")
	fmt.Fprintf(&b, "\tchain %s {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n", nftChain)
	fmt.Fprintf(&b, "\t\toifname %q ip saddr != %s ip daddr != @excluded fib daddr type != local snat to %s%s comment %q\n",
		cfg.PrimaryInterface, cfg.PrimaryIP, cfg.PrimaryIP, nftRandom(cfg.Randomize), "eniwire: pods leaving the VPC")
	b.WriteString("\t}\n}\n")
	return b.String()
}

func nftRandom(r Randomize) string {
	switch r {
	case RandomizePRNG:
		return " fully-random"
	case RandomizeHash:
		return " random"
	}
	return ""
}

func applyNFT(ctx context.Context, cfg Config) error {
	_, err := run(ctx, nftScript(cfg), "nft", "-f", "-")
	return err
}

func removeNFT(ctx context.Context) error {
	_, err := run(ctx, fmt.Sprintf("table ip %s {}\ndelete table ip %s\n", nftTable, nftTable), "nft", "-f", "-")
	return err
}
