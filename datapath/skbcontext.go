package datapath

// SKBContext is the head of the kernel's struct __sk_buff, up to the fields that BPF_PROG_TEST_RUN lets a
// caller set. Passed as ebpf.RunOptions.Context, it makes a test run look like a packet that arrived on
// device Ifindex (which must exist in the caller's network namespace): from_pod accepts a pod's packet
// only from that pod's own veth.
type SKBContext struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto uint32
	Priority, IngressIfindex, Ifindex                                           uint32
}

// ArrivingOn returns the context of a packet that arrived on ifindex.
func ArrivingOn(ifindex int) SKBContext {
	return SKBContext{IngressIfindex: uint32(ifindex), Ifindex: uint32(ifindex)}
}
