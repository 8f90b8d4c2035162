package snat

import (
	"context"
	"log/slog"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/eniwire/eniwire/internal/testenv"
)

// The agent's image has no nft binary: the nftables backend must write, replace and remove the rule over
// netlink alone. The test empties PATH so any exec would fail, and reads the result back with the nft
// binary found before, by absolute path, only to look.
func TestNFTablesBackendNeedsNoBinary(t *testing.T) {
	testenv.RequireRoot(t)
	nft := testenv.RequireTool(t, "nft")
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating netns: %v", err)
	}
	t.Cleanup(func() { _ = netns.Close(); _ = testutils.UnmountNS(netns) })
	t.Setenv("PATH", t.TempDir())
	if _, err := exec.LookPath("nft"); err == nil {
		t.Fatal("nft is still on PATH")
	}
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	inNS := func(t *testing.T, fn func() error) {
		t.Helper()
		if err := netns.Do(func(ns.NetNS) error { return fn() }); err != nil {
			t.Fatal(err)
		}
	}
	list := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		var out []byte
		var err error
		inNS(t, func() error {
			out, err = exec.Command(nft, args...).CombinedOutput()
			return nil
		})
		return string(out), err
	}
	// Someone else's table must survive every replacement and the removal.
	inNS(t, func() error {
		_, err := run(ctx, "table ip someoneelse {\n\tchain post {\n\t\ttype nat hook postrouting priority srcnat + 10; policy accept;\n\t}\n}\n", nft, "-f", "-")
		return err
	})

	t.Run("auto picks nftables when no legacy iptables is on PATH", func(t *testing.T) {
		m, err := New(ctx, Config{PrimaryIP: primaryIP, PrimaryInterface: "prim", Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		if m.Backend() != BackendNFTables {
			t.Fatalf("backend %s, want nftables", m.Backend())
		}
	})

	base := Config{PrimaryIP: primaryIP, PrimaryInterface: "prim", Backend: BackendNFTables, Logger: logger}
	for _, c := range []struct {
		name     string
		random   Randomize
		excluded []string
		elements string
	}{
		{
			name:     "fully random ports with the VPC excluded",
			random:   RandomizePRNG,
			excluded: []string{"10.99.0.0/16"},
			elements: "elements = { 10.99.0.0/16 }",
		},
		{
			name:     "random ports with overlapping and adjacent CIDRs merged as nft's auto-merge does",
			random:   RandomizeHash,
			excluded: []string{"10.0.0.0/8", "10.99.0.0/16", "192.168.1.0/24", "192.168.0.0/24", "172.16.0.0/12"},
			elements: "elements = { 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/23 }",
		},
		{
			name:     "sequential ports with a range reaching the top of the address space",
			random:   RandomizeNone,
			excluded: []string{"240.0.0.0/4", "10.99.0.0/16"},
			elements: "elements = { 10.99.0.0/16, 240.0.0.0/4 }",
		},
		{
			name:   "no excluded CIDRs leaves the set empty",
			random: RandomizePRNG,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.Randomize = c.random
			for _, s := range c.excluded {
				cfg.ExcludeCIDRs = append(cfg.ExcludeCIDRs, netip.MustParsePrefix(s))
			}
			m, err := New(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			inNS(t, func() error { return m.Apply(ctx) })
			inNS(t, func() error { return m.Apply(ctx) }) // replacing an existing table
			out, err := list(t, "list", "table", "ip", "eniwire")
			if err != nil {
				t.Fatalf("listing table: %v\n%s", err, out)
			}
			random := map[Randomize]string{RandomizePRNG: " fully-random", RandomizeHash: " random", RandomizeNone: ""}[c.random]
			want := []string{
				"set excluded {",
				"type ipv4_addr",
				"flags interval",
				"auto-merge",
				"chain pod_snat {",
				"type nat hook postrouting priority srcnat; policy accept;",
				`oifname "prim" ip saddr != 10.99.0.10 ip daddr != @excluded fib daddr type != local snat to 10.99.0.10` + random + ` comment "eniwire: pods leaving the VPC"`,
			}
			if c.elements != "" {
				want = append(want, c.elements)
			} else if strings.Contains(out, "elements") {
				t.Errorf("set has elements, want none:\n%s", out)
			}
			// nft wraps long element lists; compare with whitespace runs folded to one space.
			flat := strings.Join(strings.Fields(out), " ")
			for _, w := range want {
				if !strings.Contains(flat, w) {
					t.Errorf("table lacks %q:\n%s", w, out)
				}
			}
			if n := strings.Count(out, "eniwire: pods leaving the VPC"); n != 1 {
				t.Errorf("%d SNAT rules after applying twice, want 1", n)
			}
		})
	}

	t.Run("remove deletes our table and nothing else", func(t *testing.T) {
		m, err := New(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		inNS(t, func() error { return m.Remove(ctx) })
		inNS(t, func() error { return m.Remove(ctx) }) // nothing left to remove is not an error
		out, err := list(t, "list", "ruleset")
		if err != nil {
			t.Fatalf("listing ruleset: %v\n%s", err, out)
		}
		if strings.Contains(out, "eniwire") {
			t.Errorf("our table remains:\n%s", out)
		}
		if !strings.Contains(out, "table ip someoneelse") {
			t.Errorf("someone else's table was removed:\n%s", out)
		}
	})
}
