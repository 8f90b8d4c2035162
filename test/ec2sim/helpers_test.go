package ec2sim

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
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
	return newSeededWorld(t, mod, DefaultSeed)
}

// newSeededWorld is newWorld with another seed (DualStackSeed, PodSubnetsSeed).
func newSeededWorld(t *testing.T, mod func(*Config), seed func(region string) Seed) *world {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Throttling = false
	if mod != nil {
		mod(&cfg)
	}
	s := New(cfg)
	insts, err := s.Load(seed(cfg.Region))
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

// awsCLI returns a runner of the AWS CLI's ec2 commands against w's EC2 endpoint (text output, trimmed);
// a failed command fails t.
func (w *world) awsCLI(t *testing.T) func(args ...string) string {
	run := w.awsCLIResult(t)
	return func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("aws ec2 %v: %v: %s", args, err, out)
		}
		return out
	}
}

// awsCLIResult is awsCLI for commands that may fail: it returns the output (stderr included) and the
// command's error.
func (w *world) awsCLIResult(t *testing.T) func(args ...string) (string, error) {
	dir := t.TempDir()
	return func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctxT(t), "aws", append([]string{"ec2", "--region", "us-west-2", "--endpoint-url", w.srv.EC2URL(), "--output", "text"}, args...)...)
		cmd.Env = append(cmd.Environ(), "AWS_ACCESS_KEY_ID=AKIDCLI", "AWS_SECRET_ACCESS_KEY=secret", "AWS_EC2_METADATA_DISABLED=true",
			"AWS_CONFIG_FILE="+filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "credentials"))
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
}
