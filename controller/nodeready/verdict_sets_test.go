package nodeready

import (
	"strings"
	"testing"

	"github.com/eniwire/eniwire/controller/api"
)

// TestABlockedSecurityGroupSetIsNamedWithoutChangingTheVerdict: a set with no ENI slot leaves the node
// ready for its other pods; the message says which set gets no IP, and why.
func TestABlockedSecurityGroupSetIsNamedWithoutChangingTheVerdict(t *testing.T) {
	st := &api.Status{Ready: true, Warm: 3, SecurityGroupSets: []api.SecurityGroupSetStatus{
		{Set: "sg-0db0c11e0000000a1", IPCounts: api.IPCounts{Assigned: 2}},
		{Set: "sg-0cac4e000000000a2", Waiting: 1, Blocked: "no ENI slot for the set: the node may hold 3 ENIs"},
	}}
	v := Judge(st)
	if !v.Ready || v.Reason != ReasonIPsFree {
		t.Errorf("verdict %+v, want ready with reason %s", v, ReasonIPsFree)
	}
	want := "pods of security-group set sg-0cac4e000000000a2 get no IP: no ENI slot for the set"
	if !strings.Contains(v.Message, want) || strings.Contains(v.Message, "sg-0db0c11e0000000a1") {
		t.Errorf("message %q, want it to say %q and nothing of the set that is served", v.Message, want)
	}
}
