package ec2sim

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/internal/testenv"
)

func describeMetadataOptions(t *testing.T, w *world) *types.InstanceMetadataOptionsResponse {
	t.Helper()
	out, err := w.ec2.DescribeInstances(ctxT(t), &ec2.DescribeInstancesInput{InstanceIds: []string{w.inst.ID}})
	if err != nil {
		t.Fatal(err)
	}
	mo := out.Reservations[0].Instances[0].MetadataOptions
	if mo == nil {
		t.Fatal("DescribeInstances shows no MetadataOptions")
	}
	return mo
}

func TestModifyInstanceMetadataOptionsSetsTheHopLimitDescribeInstancesShows(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	mo := describeMetadataOptions(t, w)
	if aws.ToInt32(mo.HttpPutResponseHopLimit) != 2 || mo.HttpTokens != types.HttpTokensStateRequired ||
		mo.HttpEndpoint != types.InstanceMetadataEndpointStateEnabled || mo.State != types.InstanceMetadataOptionsStateApplied {
		t.Errorf("a new instance's metadata options = hop limit %d, tokens %q, endpoint %q, state %q; want 2, required, enabled, applied (an AMI with ImdsSupport v2.0)",
			aws.ToInt32(mo.HttpPutResponseHopLimit), mo.HttpTokens, mo.HttpEndpoint, mo.State)
	}

	out, err := w.ec2.ModifyInstanceMetadataOptions(ctx, &ec2.ModifyInstanceMetadataOptionsInput{
		InstanceId: aws.String(w.inst.ID), HttpPutResponseHopLimit: aws.Int32(1)})
	if err != nil {
		t.Fatalf("ModifyInstanceMetadataOptions: %v", err)
	}
	if aws.ToString(out.InstanceId) != w.inst.ID || out.InstanceMetadataOptions == nil ||
		aws.ToInt32(out.InstanceMetadataOptions.HttpPutResponseHopLimit) != 1 ||
		out.InstanceMetadataOptions.HttpTokens != types.HttpTokensStateRequired ||
		out.InstanceMetadataOptions.State != types.InstanceMetadataOptionsStatePending {
		t.Errorf("answer = %s %+v, want the instance with hop limit 1, tokens still required, state pending", aws.ToString(out.InstanceId), out.InstanceMetadataOptions)
	}
	if got := aws.ToInt32(describeMetadataOptions(t, w).HttpPutResponseHopLimit); got != 1 {
		t.Errorf("DescribeInstances hop limit after the change = %d, want 1", got)
	}

	filtered, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("metadata-options.http-put-response-hop-limit"), Values: []string{"1"}}}})
	if err != nil || len(filtered.Reservations) != 1 || aws.ToString(filtered.Reservations[0].Instances[0].InstanceId) != w.inst.ID {
		t.Errorf("filtering by hop limit 1 = %v, %v; want the instance", filtered, err)
	}

	for _, tc := range []struct {
		name string
		in   ec2.ModifyInstanceMetadataOptionsInput
		code string
	}{
		{"hop limit 0 is refused", ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String(w.inst.ID), HttpPutResponseHopLimit: aws.Int32(0)}, CodeInvalidParameterValue},
		{"hop limit 65 is refused", ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String(w.inst.ID), HttpPutResponseHopLimit: aws.Int32(65)}, CodeInvalidParameterValue},
		{"an unknown token mode is refused", ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String(w.inst.ID), HttpTokens: "sometimes"}, CodeInvalidParameterValue},
		{"an unknown instance is not found", ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String("i-0123456789abcdef0"), HttpPutResponseHopLimit: aws.Int32(1)}, CodeInvalidInstanceIDNotFound},
		{"a malformed instance id is refused", ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String("x-1"), HttpPutResponseHopLimit: aws.Int32(1)}, CodeInvalidInstanceIDMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := w.ec2.ModifyInstanceMetadataOptions(ctx, &tc.in)
			wantAPIError(t, err, tc.code, "", http.StatusBadRequest)
		})
	}
	if got := aws.ToInt32(describeMetadataOptions(t, w).HttpPutResponseHopLimit); got != 1 {
		t.Errorf("hop limit after refused changes = %d, want 1", got)
	}
}

func TestTheAWSCLIModifiesTheHopLimit(t *testing.T) {
	testenv.RequireTool(t, "aws")
	w := newWorld(t, nil)
	awsCLI := w.awsCLI(t)
	if got := awsCLI("modify-instance-metadata-options", "--instance-id", w.inst.ID, "--http-put-response-hop-limit", "1",
		"--query", "InstanceMetadataOptions.HttpPutResponseHopLimit"); got != "1" {
		t.Errorf("modify answered hop limit %q, want 1", got)
	}
	if got := awsCLI("describe-instances", "--instance-ids", w.inst.ID,
		"--query", "Reservations[0].Instances[0].MetadataOptions.HttpPutResponseHopLimit"); got != "1" {
		t.Errorf("describe shows hop limit %q, want 1", got)
	}
}

// ipTTL reads the IP TTL a socket sends with.
func ipTTL(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ttl int
	var serr error
	if err := raw.Control(func(fd uintptr) { ttl, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return ttl
}

// The token's answer leaves with the instance's hop limit as its IP TTL, and on a connection that closes
// after it; an ordinary GET's connection keeps the system's TTL.
func TestIMDSTokenAnswerLeavesWithTheHopLimitAsItsTTL(t *testing.T) {
	w := newWorld(t, nil)
	if _, err := w.ec2.ModifyInstanceMetadataOptions(ctxT(t), &ec2.ModifyInstanceMetadataOptionsInput{
		InstanceId: aws.String(w.inst.ID), HttpPutResponseHopLimit: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	imds := w.sim.IMDSHandler(w.inst.ID)
	ttls := make(chan int, 2) // the TTL each answer's connection sends with, read before it closes
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		imds.ServeHTTP(rw, r)
		ttls <- ipTTL(t, r.Context().Value(imdsConnKey{}).(net.Conn))
	}))
	srv.Config.ConnContext = IMDSConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	systemTTL := func() int {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		c, err := net.Dial("tcp4", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return ipTTL(t, c)
	}()

	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/latest/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("token answer: HTTP %d, Connection: close %v; want 200 on a connection that closes", resp.StatusCode, resp.Close)
	}
	if got := <-ttls; got != 3 {
		t.Errorf("the token answer's connection sends with TTL %d, want the hop limit 3", got)
	}

	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/latest/meta-data/instance-id", nil)
	resp, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-ttls; got != systemTTL {
		t.Errorf("a GET's connection sends with TTL %d, want the system's %d", got, systemTTL)
	}
}

// With HttpTokens optional a GET without a token is answered (IMDSv1); with required it is refused.
func TestIMDSv1AnswersOnlyWhenTokensAreOptional(t *testing.T) {
	w := newWorld(t, nil)
	u, err := w.srv.OpenIMDS(w.inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		resp, err := http.Get(u + "/latest/meta-data/instance-id")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(); code != http.StatusUnauthorized {
		t.Errorf("a GET without a token while tokens are required: HTTP %d, want 401", code)
	}
	if _, err := w.ec2.ModifyInstanceMetadataOptions(ctxT(t), &ec2.ModifyInstanceMetadataOptionsInput{
		InstanceId: aws.String(w.inst.ID), HttpTokens: types.HttpTokensStateOptional}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusOK || body != w.inst.ID {
		t.Errorf("a GET without a token while tokens are optional: HTTP %d %q, want 200 %s", code, body, w.inst.ID)
	}
	if mo := describeMetadataOptions(t, w); mo.HttpTokens != types.HttpTokensStateOptional || aws.ToInt32(mo.HttpPutResponseHopLimit) != 2 {
		t.Errorf("after setting only HttpTokens: tokens %q, hop limit %d; want optional, 2 (kept)", mo.HttpTokens, aws.ToInt32(mo.HttpPutResponseHopLimit))
	}
}
