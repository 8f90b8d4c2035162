package ec2sim

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// A response larger than the transport's read buffer is read from the socket after the SDK has closed
// the request body; the test client must not lose its connection under the reader (see ec2client.OwnBodyHTTPClient).
// With the SDK's bare HTTP client this failed within the first dozen calls under -race.
func TestEC2ClientReadsLargeAnswersWhole(t *testing.T) {
	w := newWorld(t, nil)
	for i := range 100 {
		out, err := w.ec2.DescribeInstanceTypes(ctxT(t), &ec2.DescribeInstanceTypesInput{})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(out.InstanceTypes) == 0 {
			t.Fatalf("call %d: no instance types", i)
		}
	}
}
