package datapath

import (
	"testing"
	"unsafe"

	"github.com/eniwire/eniwire/bpf"
)

// TestTheShippedFlagsOffsetIsTheLayoutsOwn: without CAP_SYS_ADMIN the agent cannot read a replaced pods
// map's BTF and takes the flags at the offset every released layout had; a layout that moves them must
// carry them some other way, and this test says so.
func TestTheShippedFlagsOffsetIsTheLayoutsOwn(t *testing.T) {
	if got := unsafe.Offsetof(bpf.EniwirePodValue{}.Flags); got != shippedPodFlagsOffset {
		t.Fatalf("struct pod_value's flags are at byte %d; shippedPodFlagsOffset says %d: a released layout is read there when its BTF cannot be", got, shippedPodFlagsOffset)
	}
}
