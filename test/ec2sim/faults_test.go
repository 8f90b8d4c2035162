package ec2sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestAnSDKRetryAfterADroppedResponseCreatesExactlyOneENI(t *testing.T) {
	w := newWorld(t, nil)
	w.sim.Faults().DropResponses("CreateNetworkInterface", 1)
	// The default client: 3 attempts, and an auto-filled ClientToken that every retry repeats.
	c := w.srv.EC2Client(t)
	out, err := c.CreateNetworkInterface(ctxT(t), &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetA),
		SecondaryPrivateIpAddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	st := w.sim.Snapshot()
	if len(st.ENIs) != 2 {
		t.Fatalf("%d ENIs exist, want the primary and exactly one created", len(st.ENIs))
	}
	cnt := w.sim.Counters()["CreateNetworkInterface"]
	if cnt.Calls != 2 || cnt.Dropped != 1 {
		t.Fatalf("counters = %+v, want 2 calls with 1 dropped", cnt)
	}
	if *out.NetworkInterface.NetworkInterfaceId != st.ENIs[0].ID && *out.NetworkInterface.NetworkInterfaceId != st.ENIs[1].ID {
		t.Fatalf("replay answered %s, not the ENI that exists", *out.NetworkInterface.NetworkInterfaceId)
	}
	if got := w.sim.Snapshot().Subnets[0].Available; got != 8192-5-1-3 {
		t.Fatalf("subnet available = %d: the replay allocated addresses again", got)
	}
}

func TestScriptedFaultsFailExactlyTheNextNCalls(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	attID, err := w.attach(t, *w.createENI(t, nil).NetworkInterfaceId, w.inst.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	w.sim.Faults().Script("ModifyNetworkInterfaceAttribute", CodeRequestLimitExceeded, 3)
	modify := func() error {
		_, err := w.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
			NetworkInterfaceId: aws.String(w.sim.attachmentENI(attID)),
			Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: &attID, DeleteOnTermination: aws.Bool(true)}})
		return err
	}
	for i := range 3 {
		wantAPIError(t, modify(), CodeRequestLimitExceeded, "Request limit exceeded.", 503)
		if st, _ := w.sim.ENI(w.sim.attachmentENI(attID)); st.Attachment.DeleteOnTermination {
			t.Fatalf("failed call %d changed the state", i+1)
		}
	}
	if err := modify(); err != nil {
		t.Fatalf("fourth call: %v", err)
	}
	if c := w.sim.Counters()["ModifyNetworkInterfaceAttribute"]; c.Calls != 4 || c.Errors[CodeRequestLimitExceeded] != 3 {
		t.Fatalf("counters = %+v", c)
	}
}

func (s *Sim) attachmentENI(attID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attachments[attID].ID
}

func TestAFailureAfterApplyChangesTheStateAndAnswersAServerError(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	id := *w.createENI(t, nil).NetworkInterfaceId
	w.sim.Faults().FailAfterApply("AssignPrivateIpAddresses", CodeInternalError, 1)
	_, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id),
		SecondaryPrivateIpAddressCount: aws.Int32(2)})
	wantAPIError(t, err, CodeInternalError, "An internal error has occurred", 500)
	if st, _ := w.sim.ENI(id); len(st.IPs) != 3 {
		t.Fatalf("ENI holds %v after a failure after apply, want its primary and the 2 assigned", st.IPs)
	}
	if _, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(id),
		SecondaryPrivateIpAddressCount: aws.Int32(1)}); err != nil {
		t.Fatalf("the call after the one failure: %v", err)
	}
}

func TestProbabilityLatencyAndVisibilityFaults(t *testing.T) {
	t.Run("a probability of one always fails with the code and its status", func(t *testing.T) {
		w := newWorld(t, nil)
		w.sim.Faults().SetProbability("DescribeSubnets", CodeInternalError, 1)
		_, err := w.ec2.DescribeSubnets(ctxT(t), &ec2.DescribeSubnetsInput{})
		wantAPIError(t, err, CodeInternalError, "An internal error has occurred", 500)
		w.sim.Faults().SetProbability("DescribeSubnets", CodeInternalError, 0)
		if _, err := w.ec2.DescribeSubnets(ctxT(t), &ec2.DescribeSubnetsInput{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a probability of one half fails about half the calls", func(t *testing.T) {
		w := newWorld(t, nil)
		w.sim.Faults().SetProbability("*", CodeUnavailable, 0.5)
		failed := 0
		for range 200 {
			if _, err := w.ec2.DescribeSubnets(ctxT(t), &ec2.DescribeSubnetsInput{}); err != nil {
				failed++
			}
		}
		if failed < 60 || failed > 140 {
			t.Fatalf("%d of 200 failed with p=0.5", failed)
		}
	})
	t.Run("latency delays the answer", func(t *testing.T) {
		w := newWorld(t, nil)
		w.sim.Faults().SetLatency("DescribeSubnets", 150*time.Millisecond)
		start := time.Now()
		if _, err := w.ec2.DescribeSubnets(ctxT(t), &ec2.DescribeSubnetsInput{}); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Fatalf("answered after %v", el)
		}
	})
	t.Run("a new ENI is NotFound to Describe and Attach until it propagates", func(t *testing.T) {
		w := newWorld(t, nil)
		const delay = time.Second
		w.sim.Faults().SetVisibilityDelay(delay)
		created := time.Now()
		id := *w.createENI(t, nil).NetworkInterfaceId
		_, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
		wantAPIError(t, err, CodeInvalidENIIDNotFound, "The networkInterface ID '"+id+"' does not exist", 400)
		_, err = w.attach(t, id, w.inst.ID, 1)
		wantAPIError(t, err, CodeInvalidENIIDNotFound, "", 400)
		if time.Since(created) > delay {
			t.Fatalf("the checks took longer than the %v delay; they prove nothing", delay)
		}
		waitFor(t, "the ENI to propagate", func() bool {
			_, err := w.attach(t, id, w.inst.ID, 1)
			return err == nil
		})
	})
	t.Run("an unassigned IP stays in Describe's answers for the unassign lag", func(t *testing.T) {
		w := newWorld(t, nil)
		const lag = 300 * time.Millisecond
		w.sim.Faults().SetUnassignLag(lag)
		eni := aws.String(w.inst.PrimaryENI)
		out, err := w.ec2.AssignPrivateIpAddresses(ctxT(t), &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: eni,
			SecondaryPrivateIpAddressCount: aws.Int32(1)})
		if err != nil {
			t.Fatal(err)
		}
		ip := aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress)
		unassigned := time.Now()
		if _, err := w.ec2.UnassignPrivateIpAddresses(ctxT(t), &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: eni,
			PrivateIpAddresses: []string{ip}}); err != nil {
			t.Fatal(err)
		}
		listed := func() bool {
			d, err := w.ec2.DescribeNetworkInterfaces(ctxT(t), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*eni}})
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(d.NetworkInterfaces[0].PrivateIpAddresses, func(a types.NetworkInterfacePrivateIpAddress) bool {
				return aws.ToString(a.PrivateIpAddress) == ip
			})
		}
		if !listed() {
			t.Fatalf("%s is gone from Describe at once despite the lag", ip)
		}
		if time.Since(unassigned) > lag {
			t.Fatalf("the check took longer than the %v lag; it proves nothing", lag)
		}
		waitFor(t, "the unassign to show", func() bool { return !listed() })
	})
}

func TestAdminAPIControlsFaultsAndDumpsState(t *testing.T) {
	w := newWorld(t, nil)
	post := func(path string, body any) *http.Response {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(w.srv.AdminURL()+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if r := post("/faults/script", map[string]any{"action": "DescribeSubnets", "code": "Unavailable", "n": 1}); r.StatusCode != 200 {
		t.Fatalf("script status %d", r.StatusCode)
	}
	_, err := w.ec2.DescribeSubnets(ctxT(t), &ec2.DescribeSubnetsInput{})
	wantAPIError(t, err, CodeUnavailable, "", 503)
	if r := post("/faults/script", map[string]any{"action": "", "code": "x"}); r.StatusCode != 400 {
		t.Fatalf("a script without action got %d", r.StatusCode)
	}
	if r := post("/subnets", SubnetSpec{ID: "subnet-0c", VPCID: DefaultVPC, CIDR: "10.0.64.0/24", AZ: "us-west-2c"}); r.StatusCode != 200 {
		t.Fatalf("add subnet status %d", r.StatusCode)
	}
	r := post("/instances", InstanceSpec{Type: "t3.medium", SubnetID: "subnet-0c"})
	var added struct {
		Instance
		IMDSURL string `json:"imdsUrl"`
	}
	if err := json.NewDecoder(r.Body).Decode(&added); err != nil || r.StatusCode != 201 || added.IMDSURL == "" || added.PrimaryIP == "" {
		t.Fatalf("add instance: %d %+v %v", r.StatusCode, added, err)
	}
	resp, err := http.Get(w.srv.AdminURL() + "/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Instances) != 2 || len(st.Subnets) != 3 || len(st.ENIs) != 2 || st.ENIs[0].Attachment == nil {
		t.Fatalf("state = %+v", st)
	}
	cresp, err := http.Get(w.srv.AdminURL() + "/counters")
	if err != nil {
		t.Fatal(err)
	}
	defer cresp.Body.Close()
	var c Counters
	if err := json.NewDecoder(cresp.Body).Decode(&c); err != nil || c["DescribeSubnets"].Errors[CodeUnavailable] != 1 {
		t.Fatalf("counters = %+v, %v", c, err)
	}
}
