package ec2client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// OwnBodyHTTPClient wraps an SDK HTTP client so that each request reaches the transport with a private
// in-memory copy of its body.
//
// Why: smithy-go closes the request body as soon as Do returns the response headers, while net/http's write
// loop may not have finished with the request: after sending Content-Length bytes it reads the body once more
// to check for excess bytes. On the closed body it gets io.EOF, takes that for a failed write and closes the
// connection under the caller, who is still reading the response ("use of closed network connection",
// aws-sdk-go-v2 issues 1825 and 2737). The SDK then retries a call whose side effect already happened: for
// AssignPrivateIpAddresses by count that is IPs assigned twice. Against EC2 the window is small; against a
// fast endpoint (a simulator on loopback, a VPC endpoint under load) it is hit once in a few dozen calls.
func OwnBodyHTTPClient(next ec2.HTTPClient) ec2.HTTPClient { return ownBodyClient{next: next} }

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
	// The caller keeps (and closes) its own request and body; the transport gets a copy that only it reads.
	// A bytes.Reader is also one net/http knows to be in memory, so it sends headers and body in one write.
	own := req.Clone(req.Context())
	own.ContentLength = int64(len(body))
	own.Body = io.NopCloser(bytes.NewReader(body))
	own.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return c.next.Do(own)
}
