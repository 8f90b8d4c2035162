package ec2client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// meaning is what the vocabulary should say of an error EC2 answered.
type meaning struct {
	kind           error
	mayHaveApplied bool
	throttle       bool
}

var (
	throttled   = meaning{kind: ec2client.ErrTransient, throttle: true}
	serverError = meaning{kind: ec2client.ErrTransient, mayHaveApplied: true}
)

// answer is one error the simulator gives: a fault injected on DescribeSubnets, or what provoke makes it answer
// by itself.
type answer struct {
	code    string
	provoke func(ctx context.Context, sim *ec2sim.Sim, api ec2client.EC2API) error
	want    meaning
}

// answers covers every code of the vocabulary (the test checks that it does) and the errors without a code.
var answers = []answer{
	{code: "RequestLimitExceeded", want: throttled},
	{code: "Throttling", want: throttled},
	{code: "ThrottlingException", want: throttled},
	{code: "RequestThrottled", want: throttled},
	{code: "EC2ThrottledException", want: throttled},
	{code: "TooManyRequestsException", want: throttled},
	{code: "InternalError", want: serverError},
	{code: "InternalFailure", want: serverError},
	{code: "ServiceUnavailable", want: serverError},
	{code: "Unavailable", want: serverError},
	{code: "UnauthorizedOperation", want: meaning{kind: ec2client.ErrUnauthorized}},
	{code: "AuthFailure", want: meaning{kind: ec2client.ErrUnauthorized}},
	{code: "InvalidNetworkInterfaceID.NotFound", want: meaning{kind: ec2client.ErrTransient},
		provoke: func(ctx context.Context, _ *ec2sim.Sim, api ec2client.EC2API) error {
			_, err := api.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
				NetworkInterfaceIds: []string{"eni-0123456789abcdef0"}}, oneAttempt)
			return err
		}},
	{code: "IncorrectState", want: meaning{kind: ec2client.ErrTransient}},
	{code: "AttachmentLimitExceeded", want: meaning{kind: ec2client.ErrBooksWrong}},
	{code: "InvalidAttachmentID.NotFound", want: meaning{kind: ec2client.ErrBooksWrong},
		provoke: func(ctx context.Context, _ *ec2sim.Sim, api ec2client.EC2API) error {
			_, err := api.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{
				AttachmentId: aws.String("eni-attach-0123456789abcdef0")}, oneAttempt)
			return err
		}},
	{code: "PrivateIpAddressLimitExceeded", want: meaning{kind: ec2client.ErrBooksWrong}},
	{code: "InsufficientFreeAddressesInSubnet", want: meaning{kind: ec2client.ErrSubnetFull},
		provoke: func(ctx context.Context, sim *ec2sim.Sim, api ec2client.EC2API) error {
			if _, err := sim.ExhaustSubnet("subnet-1", 0); err != nil {
				return err
			}
			_, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1")}, oneAttempt)
			return err
		}},
	{code: "InsufficientCidrBlocks", want: meaning{kind: ec2client.ErrNoPrefix}},
	{code: "InvalidParameterValue", want: meaning{kind: ec2client.ErrRejected}},
	{code: "InvalidNetworkInterface.InUse", want: meaning{kind: ec2client.ErrRejected}},
	// A subnet without room for a /28 answers InvalidParameterValue, which then means the subnet is full.
	{code: "InvalidParameterValue", want: meaning{kind: ec2client.ErrSubnetFull},
		provoke: func(ctx context.Context, sim *ec2sim.Sim, api ec2client.EC2API) error {
			if _, err := sim.ExhaustSubnet("subnet-1", 5); err != nil {
				return err
			}
			_, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1"),
				Ipv4PrefixCount: aws.Int32(1)}, oneAttempt)
			return err
		}},
	// A code the vocabulary does not list is a definite refusal.
	{code: "InvalidGroup.NotFound", want: meaning{kind: ec2client.ErrRejected},
		provoke: func(ctx context.Context, _ *ec2sim.Sim, api ec2client.EC2API) error {
			_, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1"),
				Groups: []string{"sg-0000000000000dead"}}, oneAttempt)
			return err
		}},
	// No answer at all: the change may have been made.
	{code: "", want: meaning{kind: ec2client.ErrTransient, mayHaveApplied: true},
		provoke: func(ctx context.Context, sim *ec2sim.Sim, api ec2client.EC2API) error {
			sim.Faults().DropResponses("CreateNetworkInterface", 1)
			_, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-1")}, oneAttempt)
			return err
		}},
}

// oneAttempt keeps the SDK from retrying, so that each call is exactly one answer of the simulator.
func oneAttempt(o *ec2.Options) { o.RetryMaxAttempts = 1 }

// Every code the project tells apart comes back from the simulator's XML error envelope through the real SDK
// client, bare (as the commit tests call EC2) and wrapped (as the agent does), and the vocabulary reads it as
// intended: its kind, whether the call may have been applied, whether EC2 asks the node to slow down.
func TestTheVocabularyReadsEachErrorTheSimulatorAnswersAsIntended(t *testing.T) {
	covered := map[string]bool{}
	for _, a := range answers {
		covered[a.code] = true
	}
	for _, code := range ec2client.Codes() {
		if !covered[code] {
			t.Errorf("the vocabulary classifies %s, which this test never has the simulator answer", code)
		}
	}
	for _, wrapped := range []bool{false, true} {
		name := "bare SDK"
		if wrapped {
			name = "wrapped"
		}
		t.Run(name, func(t *testing.T) {
			for _, a := range answers {
				code := a.code
				if code == "" {
					code = "no answer"
				}
				t.Run(code+": "+a.want.kind.Error(), func(t *testing.T) {
					sim, sdk := simEC2(t)
					var api ec2client.EC2API = sdk
					if wrapped {
						// One attempt: a throttle comes back as the wrapper hands it on once its retries are spent.
						c, err := ec2client.New(sdk, ec2client.Config{MaxAttempts: 1}, prometheus.NewRegistry(), nil)
						if err != nil {
							t.Fatalf("wrapping: %v", err)
						}
						api = c
					}
					ctx := context.Background()
					var err error
					if a.provoke != nil {
						err = a.provoke(ctx, sim, api)
					} else {
						sim.Faults().Script("DescribeSubnets", a.code, 1)
						_, err = api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-1"}}, oneAttempt)
					}
					if err == nil {
						t.Fatalf("the simulator answered without the error %q", a.code)
					}
					if got := ec2client.ErrorCode(err); got != a.code {
						t.Fatalf("the SDK's error %v carries code %q, want %q", err, got, a.code)
					}
					if got := ec2client.KindOf(err); got != a.want.kind {
						t.Errorf("kind of %v = %v, want %v", err, got, a.want.kind)
					}
					if c := ec2client.Classify("calling EC2", err); !errors.Is(c, a.want.kind) || ec2client.ErrorCode(c) != a.code {
						t.Errorf("Classify gave %v, want it to wrap %v and keep code %q", c, a.want.kind, a.code)
					}
					if got := ec2client.MayHaveApplied(err); got != a.want.mayHaveApplied {
						t.Errorf("MayHaveApplied(%v) = %v, want %v", err, got, a.want.mayHaveApplied)
					}
					if got := ec2client.IsThrottle(err); got != a.want.throttle {
						t.Errorf("IsThrottle(%v) = %v, want %v", err, got, a.want.throttle)
					}
				})
			}
		})
	}
}
