package ec2sim

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller/ec2client"
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
		HTTPClient:   ec2client.OwnBodyHTTPClient(awshttp.NewBuildableClient()),
	}, optFns...)
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
	return imds.New(imds.Options{Endpoint: u, HTTPClient: ec2client.OwnBodyHTTPClient(awshttp.NewBuildableClient())})
}

// StartTest starts a server for a test on loopback and closes it at the end of the test.
func StartTest(tb testing.TB, s *Sim) *Server {
	tb.Helper()
	return StartTestWith(tb, s, ServerOptions{})
}

// StartTestWith is StartTest with opts (listeners inside a node's network namespace, say).
func StartTestWith(tb testing.TB, s *Sim, opts ServerOptions) *Server {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, s, opts)
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

// SetSDKEnv points the SDK's standard environment (AWS_ENDPOINT_URL_EC2, AWS_REGION, static credentials,
// no shared config files, no IMDS) at the EC2 API at ec2URL for the rest of the test, so that code building
// its clients from the environment (ec2client.NewSDK) talks to a simulator.
func SetSDKEnv(t testing.TB, ec2URL, region string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_EC2": ec2URL, "AWS_REGION": region, "AWS_ACCESS_KEY_ID": TestAccessKey,
		"AWS_SECRET_ACCESS_KEY": TestSecretKey, "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
	} {
		t.Setenv(k, v)
	}
}
