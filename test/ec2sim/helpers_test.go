package ec2sim

import (
	"context"
	"errors"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// world is a simulator with the default seed, served on loopback, and an SDK client for it.
type world struct {
	sim  *Sim
	srv  *Server
	ec2  *ec2.Client
	inst Instance
	note string // a value a test case hands from its call to its expectation
}

func newWorld(t *testing.T, mod func(*Config)) *world {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Throttling = false
	if mod != nil {
		mod(&cfg)
	}
	s := New(cfg)
	insts, err := s.Load(DefaultSeed(cfg.Region))
	if err != nil {
		t.Fatal(err)
	}
	srv := StartTest(t, s)
	return &world{sim: s, srv: srv, ec2: srv.EC2Client(t, func(o *ec2.Options) { o.RetryMaxAttempts = 1 }), inst: insts[0]}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantAPIError checks the EC2 error code, message and HTTP status the SDK surfaced.
func wantAPIError(t *testing.T, err error, code, msg string, status int) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %s", code)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want API error %s", err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("code = %q (%s), want %q", ae.ErrorCode(), ae.ErrorMessage(), code)
	}
	if msg != "" && ae.ErrorMessage() != msg {
		t.Fatalf("message = %q, want %q", ae.ErrorMessage(), msg)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("no HTTP response in %v", err)
	}
	if re.HTTPStatusCode() != status {
		t.Fatalf("status = %d, want %d", re.HTTPStatusCode(), status)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
