package datapath

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/eniwire/eniwire/internal/testenv"
)

// The fast paths' one write to a packet, the TTL.

// TestNoProgramUnclonesEveryPacket: a tc program that writes packet data directly gets an unclone step
// put in front of it by the verifier (tc_cls_act_prologue: bpf_skb_pull_data on every cloned packet, which
// drops the packet, uncounted, when the copy cannot be allocated). Every cloned packet would pay it, those
// passed to the host included; the programs write through helpers, only on the fast path.
func TestNoProgramUnclonesEveryPacket(t *testing.T) {
	d := openTest(t, testConfig(true))
	pull := helperCallImm(t, "bpf_skb_pull_data")
	for _, h := range hooks {
		info, err := h.program(d).Info()
		if err != nil {
			t.Fatal(err)
		}
		insns, err := info.Instructions()
		if err != nil {
			t.Fatalf("reading the xlated instructions of %s: %v", h.progName(), err)
		}
		for i, ins := range insns {
			if ins.IsBuiltinCall() && ins.Constant == pull {
				t.Errorf("%s calls bpf_skb_pull_data at instruction %d: the verifier's unclone step for direct packet writes", h.progName(), i)
			}
		}
	}
}

// TestForwardedPacketsLeaveWithTheTTLDecrementedAndTheChecksumValid over every TTL the fast paths forward,
// so that the incremental checksum update meets its carries.
func TestForwardedPacketsLeaveWithTheTTLDecrementedAndTheChecksumValid(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	n := runNS(t, testVeths...)
	for _, c := range []struct {
		name string
		prog func(d *Datapath) *ebpf.Program
		on   int
		pkt  func() []byte
	}{
		{"from a pod out of its ENI", fromPod, vethPod2, func() []byte { return frame(pod2, vpcPeer, protoUDP, 7002, 7002) }},
		{"from a pod to a pod", fromPod, vethPod2, func() []byte { return frame(pod2, pod1, protoUDP, 7003, 7003) }},
		{"from the VPC into a pod", toPod, 0, func() []byte { return frame(vpcPeer, pod1, protoTCP, 443, 40000) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			for ttl := 2; ttl <= 255; ttl++ {
				out := runOut(t, n, c.prog(d), c.on, withTTL(c.pkt(), uint8(ttl)))
				if got := int(out[ethLen+8]); got != ttl-1 || !ipChecksumValid(out) {
					t.Fatalf("TTL %d left as %d, checksum valid %v; want %d, valid", ttl, got, ipChecksumValid(out), ttl-1)
				}
			}
		})
	}
}

// helperCallImm is the immediate of a call to kernel helper fn in xlated instructions, as the verifier
// leaves it: the helper's address relative to __bpf_call_base (bpftool resolves them the same way).
func helperCallImm(t *testing.T, fn string) int64 {
	t.Helper()
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		testenv.Unavailable(t, "cannot read /proc/kallsyms: "+err.Error())
	}
	defer f.Close()
	addrs := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || (fields[2] != fn && fields[2] != "__bpf_call_base") {
			continue
		}
		a, err := strconv.ParseUint(fields[0], 16, 64)
		if err == nil && a != 0 {
			addrs[fields[2]] = a
		}
	}
	base, ok1 := addrs["__bpf_call_base"]
	at, ok2 := addrs[fn]
	if !ok1 || !ok2 {
		testenv.Unavailable(t, "/proc/kallsyms shows no address for __bpf_call_base or "+fn+" (kptr_restrict?)")
	}
	return int64(int32(at - base))
}
