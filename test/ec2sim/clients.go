package ec2sim

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	}, optFns...)
}

// IMDSClient returns an IMDS client for one instance of this server.
func (srv *Server) IMDSClient(tb testing.TB, instanceID string) *imds.Client {
	tb.Helper()
	u, err := srv.OpenIMDS(instanceID)
	if err != nil {
		tb.Fatalf("opening IMDS for %s: %v", instanceID, err)
	}
	return imds.New(imds.Options{Endpoint: u})
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
