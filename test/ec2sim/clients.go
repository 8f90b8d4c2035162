package ec2sim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// Dummy credentials: the simulator reads only the signing region.
const (
	TestAccessKey = "AKIDEXAMPLE"
	TestSecretKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

// EC2Client returns an SDK client for this server (static credentials, its region, BaseEndpoint), with
// optional further options.
func (srv *Server) EC2Client(tb testing.TB, optFns ...func(*ec2.Options)) *ec2.Client {
	tb.Helper()
	return ec2.New(ec2.Options{
		Region:       srv.sim.cfg.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(TestAccessKey, TestSecretKey, ""),
		BaseEndpoint: aws.String(srv.EC2URL()),
		HTTPClient:   NewHTTPClient(awshttp.NewBuildableClient()),
	}, optFns...)
}

// NewHTTPClient wraps an SDK HTTP client so that it survives the simulator's fast answers: each request
// goes to the transport with a private in-memory copy of its body.
//
// Why: smithy-go closes the request body as soon as Do returns the response headers, while net/http's
// write loop may not yet have finished writing the request: after sending Content-Length bytes it reads
// the body once more to check for excess bytes. On the closed body smithy-go's WriteTo answers io.EOF,
// net/http takes that for a failed write and closes the connection under the caller, who is still
// reading the response body ("use of closed network connection", aws-sdk-go-v2 issues 1825 and 2737).
// Against EC2 the answer takes milliseconds and the window is almost never hit; on loopback the
// simulator answers in microseconds, and under -race or CPU load a response larger than the transport's
// 4 KiB read buffer (DescribeInstanceTypes) fails this way about once in a few dozen calls.
func NewHTTPClient(next ec2.HTTPClient) ec2.HTTPClient { return ownBodyClient{next: next} }

type ownBodyClient struct{ next ec2.HTTPClient }

func (c ownBodyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return c.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("buffering the request body: %w", err)
	}
	// The caller keeps (and closes) its own request and body; the transport gets a copy that only it
	// reads. A bytes.Reader behind io.NopCloser is also one net/http knows to be in memory, so it sends
	// headers and body in one write.
	own := req.Clone(req.Context())
	own.ContentLength = int64(len(body))
	own.Body = io.NopCloser(bytes.NewReader(body))
	own.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return c.next.Do(own)
}

// IMDSClient returns an IMDS client for one instance of this server.
//
// Its HTTP client is not the SDK's BuildableClient on purpose: given one, the imds package cuts the dial
// timeout to 250 ms and the response-header timeout to 500 ms so that a process that is not on EC2 fails
// fast. Here the service is known to be there, and on a loaded test host (the 300-node fleet under -race,
// two test binaries on two CPUs) a loopback dial or answer can take longer than that, which failed the
// fleet test with "dial tcp: i/o timeout". The SDK's 5 s limit per IMDS operation still applies.
func (srv *Server) IMDSClient(tb testing.TB, instanceID string) *imds.Client {
	tb.Helper()
	u, err := srv.OpenIMDS(instanceID)
	if err != nil {
		tb.Fatalf("opening IMDS for %s: %v", instanceID, err)
	}
	return imds.New(imds.Options{Endpoint: u, HTTPClient: NewHTTPClient(awshttp.NewBuildableClient())})
}

// StartTest starts a server for a test on loopback and closes it at the end of the test.
func StartTest(tb testing.TB, s *Sim) *Server {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, s, ServerOptions{})
	if err != nil {
		cancel()
		tb.Fatalf("starting ec2sim: %v", err)
	}
	tb.Cleanup(func() {
		cancel()
		srv.Close()
	})
	return srv
}
