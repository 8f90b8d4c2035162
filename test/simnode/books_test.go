package simnode

import (
	"slices"
	"testing"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/test/ec2sim"
)

func TestCompareBooksNamesLeakedAndLostENIs(t *testing.T) {
	const inst = "i-1"
	ours := map[string]string{eni.TagOwner: inst}
	attached := func(id string, dev int, tags map[string]string) ec2sim.ENIState {
		return ec2sim.ENIState{ID: id, Status: "in-use", Tags: tags,
			Attachment: &ec2sim.AttachmentState{InstanceID: inst, DeviceIndex: dev, DeleteOnTermination: true}}
	}
	for _, c := range []struct {
		name         string
		agent        []api.ENIStatus
		ec2          []ec2sim.ENIState
		leaked, lost []string
	}{
		{"books that hold every attached ENI match",
			[]api.ENIStatus{{ID: "eni-p", State: "ready", Primary: true}, {ID: "eni-2", State: "ready", DeviceIndex: 1}},
			[]ec2sim.ENIState{attached("eni-p", 0, nil), attached("eni-2", 1, ours)}, nil, nil},
		{"an attached ENI of ours missing from the books leaked",
			[]api.ENIStatus{{ID: "eni-p", State: "ready", Primary: true}},
			[]ec2sim.ENIState{attached("eni-p", 0, nil), attached("eni-2", 1, ours)}, []string{"eni-2"}, nil},
		{"an available ENI of ours leaked",
			[]api.ENIStatus{{ID: "eni-p", State: "ready", Primary: true}},
			[]ec2sim.ENIState{attached("eni-p", 0, nil), {ID: "eni-3", Status: "available", Tags: ours}}, []string{"eni-3"}, nil},
		{"a booked ENI that EC2 no longer attaches is lost",
			[]api.ENIStatus{{ID: "eni-p", State: "ready", Primary: true}, {ID: "eni-2", State: "attached", DeviceIndex: 1}},
			[]ec2sim.ENIState{attached("eni-p", 0, nil)}, nil, []string{"eni-2"}},
		{"another instance's ENIs are not ours to count",
			[]api.ENIStatus{{ID: "eni-p", State: "ready", Primary: true}},
			[]ec2sim.ENIState{attached("eni-p", 0, nil), {ID: "eni-x", Status: "available", Tags: map[string]string{eni.TagOwner: "i-2"}}}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := LineUpBooks(inst, c.agent, c.ec2)
			if !slices.Equal(b.Leaked, c.leaked) || !slices.Equal(b.Lost, c.lost) {
				t.Errorf("leaked %v lost %v, want %v and %v", b.Leaked, b.Lost, c.leaked, c.lost)
			}
			if b.Match() != (len(c.leaked)+len(c.lost) == 0) {
				t.Errorf("Match() = %v with leaked %v lost %v", b.Match(), b.Leaked, b.Lost)
			}
		})
	}
}
