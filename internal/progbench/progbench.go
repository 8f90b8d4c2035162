// Package progbench times a tc program on one packet with BPF_PROG_TEST_RUN, for benchmarks.
package progbench

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/eniwire/eniwire/internal/inetsum"
)

// Batch is how many runs share one copy of the packet. A test run's repeats all see the same packet, and
// eniwire's fast paths decrement its TTL as a router does: a packet sent with TTL 255 stays above 1 for
// this many runs, so every run takes the path measured.
const Batch = 250

// Run runs prog on pkt (sent with TTL 255) repeat times, in batches of Batch on a fresh copy each, and
// returns the verdict of the last run and the kernel-timed mean per run.
func Run(prog *ebpf.Program, pkt []byte, repeat int) (uint32, time.Duration, error) {
	const ttlOffset = 14 + 8 // Ethernet, then the IPv4 TTL
	if len(pkt) <= ttlOffset {
		return 0, 0, fmt.Errorf("packet of %d bytes has no IPv4 TTL", len(pkt))
	}
	fresh := append([]byte(nil), pkt...)
	fresh[ttlOffset] = 255
	// The programs hand a header whose checksum does not verify to the host: keep it valid after the TTL.
	if ihl := int(fresh[14]&0x0f) * 4; len(fresh) >= 14+ihl {
		inetsum.SetIPv4Header(fresh[14 : 14+ihl])
	}
	var (
		ret   uint32
		total time.Duration
	)
	for done := 0; done < repeat; {
		n := min(Batch, repeat-done)
		r, per, err := prog.Benchmark(fresh, n, nil)
		if err != nil {
			return 0, 0, err
		}
		ret, total, done = r, total+per*time.Duration(n), done+n
	}
	if repeat == 0 {
		return 0, 0, nil
	}
	return ret, total / time.Duration(repeat), nil
}
