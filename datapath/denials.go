package datapath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/eniwire/eniwire/bpf"
)

// PolicyDenial is a new flow that a pod's NetworkPolicy denied, as the programs report it through the
// policy_denials ring buffer: at most 64 a second per CPU, so a flood of denied packets shows in the
// counters and not as one event each.
type PolicyDenial struct {
	Pod      netip.Addr // the pod whose policy denied the flow
	Peer     netip.Addr // the other end
	PolicyID uint32     // the pod's policy id (0 when its policy did not fit the maps)
	Egress   bool       // the pod's egress rules denied it; else its ingress rules
	Protocol uint8
	Port     uint16 // the responder's port
	Verdict  Verdict
}

// ReadPolicyDenials calls fn with each denial the programs report until ctx ends, then returns ctx's
// error. Only one reader should run: each denial goes to one of them.
func (d *Datapath) ReadPolicyDenials(ctx context.Context, fn func(PolicyDenial)) error {
	r, err := ringbuf.NewReader(d.objs.PolicyDenials)
	if err != nil {
		return fmt.Errorf("opening the policy denials ring buffer: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = r.Close() })
	defer stop()
	defer r.Close()
	for {
		rec, err := r.Read()
		if errors.Is(err, ringbuf.ErrClosed) {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("reading the policy denials ring buffer: %w", err)
		}
		var e bpf.EniwirePolicyDenial
		if err := binary.Read(bytes.NewReader(rec.RawSample), binary.NativeEndian, &e); err != nil {
			return fmt.Errorf("decoding a policy denial: %w", err)
		}
		fn(PolicyDenial{
			Pod: addrFromKey(e.Pod), Peer: addrFromKey(e.Peer), PolicyID: e.Flags & policyIDMask,
			Egress: e.Direction == policyDirEgress, Protocol: e.Protocol, Port: e.Port, Verdict: Verdict(e.Verdict),
		})
	}
}
