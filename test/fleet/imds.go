package fleet

import (
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// nodeIMDS is the instance metadata service of one node, served by the simulator's IMDS handler in-process
// through the SDK's IMDS client: a thousand nodes, no listener each. A node reads it at its first view of its
// ENIs and at each reconcile, as the agent does on an instance.
func nodeIMDS(sim *ec2sim.Sim, instanceID string) metadata.IMDS {
	h := sim.IMDSHandler(instanceID)
	return metadata.IMDS{API: imds.New(imds.Options{Endpoint: "http://169.254.169.254",
		HTTPClient: &http.Client{Transport: handlerTransport{h}}})}
}

// handlerTransport answers every request with h, in the caller's goroutine.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
