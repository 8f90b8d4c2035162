package snat

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The nftables backend speaks netlink itself: the agent's image is distroless and carries no `nft`.
// What it writes is what this nft script would:
//
//	table ip eniwire {
//		set excluded { type ipv4_addr; flags interval; auto-merge; elements = { <ExcludeCIDRs> } }
//		chain pod_snat {
//			type nat hook postrouting priority srcnat; policy accept;
//			oifname "<if>" ip saddr <EgressCIDR> fib daddr type != local
//				snat to <ip> [fully-random|random] comment "eniwire: IPv6 pods' IPv4 egress"   (IPv6 mode)
//			oifname "<if>" ip saddr != <ip> ip daddr != @excluded fib daddr type != local
//				snat to <ip> [fully-random|random] comment "eniwire: pods leaving the VPC"
//		}
//	}

const (
	nftSet     = "excluded"
	nftComment = "eniwire: pods leaving the VPC"
	// egressComment marks the rule translating IPv6 pods' IPv4 egress addresses (Config.EgressCIDR).
	egressComment = "eniwire: IPv6 pods' IPv4 egress"
	ifNameSize    = unix.IFNAMSIZ
)

// applyNFT replaces the whole table in one netlink batch: adding the table first makes the delete valid
// when it does not exist yet, and the kernel commits the batch as one transaction, so packets never see
// a half-written chain and a failure leaves the previous rule in place.
func applyNFT(cfg Config) error {
	return withNFT(func(c *nftables.Conn) error {
		table := &nftables.Table{Name: nftTable, Family: nftables.TableFamilyIPv4}
		c.AddTable(table)
		c.DelTable(table)
		c.AddTable(table)
		set := &nftables.Set{
			Table:        table,
			Name:         nftSet,
			KeyType:      nftables.TypeIPAddr,
			KeyByteOrder: binaryutil.BigEndian,
			Interval:     true,
			AutoMerge:    true,
		}
		if err := c.AddSet(set, intervalElements(cfg.ExcludeCIDRs)); err != nil {
			return fmt.Errorf("adding set %s: %w", nftSet, err)
		}
		accept := nftables.ChainPolicyAccept
		chain := c.AddChain(&nftables.Chain{
			Name:     nftChain,
			Table:    table,
			Type:     nftables.ChainTypeNAT,
			Hooknum:  nftables.ChainHookPostrouting,
			Priority: nftables.ChainPriorityNATSource,
			Policy:   &accept,
		})
		if cfg.EgressCIDR.IsValid() {
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: egressExprs(cfg), UserData: userdata.AppendString(nil, userdata.TypeComment, egressComment)})
		}
		if !cfg.External {
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: snatExprs(cfg, set), UserData: userdata.AppendString(nil, userdata.TypeComment, nftComment)})
		}
		return nil
	})
}

// removeNFT deletes the table and everything in it, and nothing else. A kernel without nf_tables has
// nothing of ours to remove.
func removeNFT() error {
	err := withNFT(func(c *nftables.Conn) error {
		table := &nftables.Table{Name: nftTable, Family: nftables.TableFamilyIPv4}
		c.AddTable(table)
		c.DelTable(table)
		return nil
	})
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
		return nil
	}
	return err
}

// withNFT queues changes with build and sends them as one batch, in the network namespace of the calling
// thread (the agent's, or a test's netns entered with the thread locked). Only a thread in another namespace
// than the process's names its namespace to the netlink socket: that makes the socket's thread setns(),
// which needs CAP_SYS_ADMIN, which the agent's container does not have.
func withNFT(build func(*nftables.Conn) error) error {
	runtime.LockOSThread()
	f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("opening the thread's network namespace: %w", err)
	}
	defer f.Close()
	var opts []nftables.ConnOption
	if !sameNetns(f) {
		opts = append(opts, nftables.WithNetNSFd(int(f.Fd())))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("opening nftables netlink: %w", err)
	}
	if err := build(c); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("committing nftables batch: %w", err)
	}
	return nil
}

// sameNetns says whether the namespace open as f is the process's own (its main thread's).
func sameNetns(f *os.File) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat("/proc/self/ns/net", &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// egressExprs is the egress rule's bytecode (IPv6 mode), as nft compiles
//
//	oifname "<if>" ip saddr <egress range> fib daddr type != local snat to <ip> [fully-random|random]
func egressExprs(cfg Config) []expr.Any {
	ifname := make([]byte, ifNameSize)
	copy(ifname, cfg.PrimaryInterface)
	egress := cfg.EgressCIDR.Masked()
	return append([]expr.Any{
		// oifname "<if>"
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname},
		// ip saddr <egress range>: the address masked, then compared with the range's first
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: net.CIDRMask(egress.Bits(), 32), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: egress.Addr().AsSlice()},
	}, snatToPrimary(cfg)...)
}

// snatToPrimary is both rules' tail: fib daddr type != local, then snat to the primary IP.
func snatToPrimary(cfg Config) []expr.Any {
	primary := cfg.PrimaryIP.AsSlice()
	return []expr.Any{
		// fib daddr type != local: the route type is a host-endian u32 in the register.
		&expr.Fib{Register: 1, ResultADDRTYPE: true, FlagDADDR: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		// snat to <ip> [fully-random|random]
		&expr.Immediate{Register: 1, Data: primary},
		&expr.NAT{
			Type:        expr.NATTypeSourceNAT,
			Family:      unix.NFPROTO_IPV4,
			RegAddrMin:  1,
			FullyRandom: cfg.Randomize == RandomizePRNG,
			Random:      cfg.Randomize == RandomizeHash,
		},
	}
}

// snatExprs is the rule's bytecode, matcher by matcher as nft compiles the script above.
func snatExprs(cfg Config, excluded *nftables.Set) []expr.Any {
	ifname := make([]byte, ifNameSize)
	copy(ifname, cfg.PrimaryInterface)
	primary := cfg.PrimaryIP.AsSlice()
	return append([]expr.Any{
		// oifname "<if>"
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname},
		// ip saddr != <ip>
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: primary},
		// ip daddr != @excluded
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: excluded.Name, SetID: excluded.ID, Invert: true},
	}, snatToPrimary(cfg)...)
}

// intervalElements encodes prefixes for an interval set the way nft does after auto-merge: overlapping
// or adjacent prefixes become one range (the kernel rejects overlaps), each range is a start element and
// an end element holding the first address after it, and a leading end element at 0.0.0.0 closes the
// gap below the first range. A range reaching 255.255.255.255 has no end element.
func intervalElements(prefixes []netip.Prefix) []nftables.SetElement {
	type span struct{ from, to uint64 } // [from, to)
	spans := make([]span, 0, len(prefixes))
	for _, p := range prefixes {
		p = p.Masked()
		from := uint64(binary.BigEndian.Uint32(p.Addr().AsSlice()))
		spans = append(spans, span{from, from + 1<<(32-p.Bits())})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && s.from <= merged[n-1].to {
			merged[n-1].to = max(merged[n-1].to, s.to)
			continue
		}
		merged = append(merged, s)
	}
	var elems []nftables.SetElement
	if len(merged) > 0 && merged[0].from != 0 {
		elems = append(elems, nftables.SetElement{Key: ipv4(0), IntervalEnd: true})
	}
	for _, s := range merged {
		elems = append(elems, nftables.SetElement{Key: ipv4(s.from)})
		if s.to <= 0xffffffff {
			elems = append(elems, nftables.SetElement{Key: ipv4(s.to), IntervalEnd: true})
		}
	}
	return elems
}

func ipv4(a uint64) []byte { return binary.BigEndian.AppendUint32(nil, uint32(a)) }
