package ec2client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/internal/clock"
)

// queryEndpoint is a minimal EC2 Query endpoint: it answers each request with the next scripted error (status
// and code, in EC2's envelope) or, when the script is empty, an empty DescribeSubnets result.
type queryEndpoint struct {
	mu       sync.Mutex
	requests int
	script   []scriptedError
}

type scriptedError struct {
	status int
	code   string
}

func (q *queryEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.mu.Lock()
	q.requests++
	var next *scriptedError
	if len(q.script) > 0 {
		next, q.script = &q.script[0], q.script[1:]
	}
	q.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	if next != nil {
		w.WriteHeader(next.status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>scripted</Message></Error></Errors><RequestID>req-1</RequestID></Response>`, next.code)
		return
	}
	fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>
<DescribeSubnetsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>req-2</requestId><subnetSet/></DescribeSubnetsResponse>`)
}

func (q *queryEndpoint) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.requests
}

// sdkEnv points the SDK's standard variables at url, with static credentials and no shared config files.
func sdkEnv(t *testing.T, ec2URL string) {
	dir := t.TempDir()
	t.Setenv("AWS_ENDPOINT_URL_EC2", ec2URL)
	t.Setenv("AWS_REGION", "us-west-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_MAX_ATTEMPTS", "")
	t.Setenv("AWS_RETRY_MODE", "")
}

func TestSDKRetriesServerErrorsButNotThrottles(t *testing.T) {
	tests := []struct {
		name      string
		script    []scriptedError
		wantCalls int
		wantCode  string
	}{
		{name: "a throttle is sent once and handed back", script: []scriptedError{{503, "RequestLimitExceeded"}, {503, "RequestLimitExceeded"}},
			wantCalls: 1, wantCode: "RequestLimitExceeded"},
		{name: "a throttle with status 400 is sent once too", script: []scriptedError{{400, "RequestLimitExceeded"}}, wantCalls: 1, wantCode: "RequestLimitExceeded"},
		{name: "an internal error is retried by the SDK", script: []scriptedError{{500, "InternalError"}, {503, "Unavailable"}}, wantCalls: 3},
		{name: "a denial is sent once", script: []scriptedError{{403, "UnauthorizedOperation"}, {403, "UnauthorizedOperation"}},
			wantCalls: 1, wantCode: "UnauthorizedOperation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &queryEndpoint{script: append([]scriptedError(nil), tt.script...)}
			srv := httptest.NewServer(q)
			defer srv.Close()
			sdkEnv(t, srv.URL)
			api, _, err := NewSDK(context.Background(), SDKOptions{})
			if err != nil {
				t.Fatalf("building the SDK clients: %v", err)
			}
			_, err = api.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{})
			if got := q.count(); got != tt.wantCalls {
				t.Errorf("the endpoint saw %d attempts, want %d", got, tt.wantCalls)
			}
			if ErrorCode(err) != tt.wantCode {
				t.Errorf("got error %v, want code %q", err, tt.wantCode)
			}
		})
	}
}

func TestWrapperRetriesThrottlesThroughTheSDK(t *testing.T) {
	q := &queryEndpoint{script: []scriptedError{{503, "RequestLimitExceeded"}, {503, "RequestLimitExceeded"}}}
	srv := httptest.NewServer(q)
	defer srv.Close()
	sdkEnv(t, srv.URL)
	api, _, err := NewSDK(context.Background(), SDKOptions{})
	if err != nil {
		t.Fatalf("building the SDK clients: %v", err)
	}
	clk := clock.NewScaled(100)
	c, _ := newTestClient(t, api, Config{Clock: clk})
	if _, err := c.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("describing subnets through the wrapper: %v", err)
	}
	if got := q.count(); got != 3 {
		t.Errorf("the endpoint saw %d attempts, want 3 (two throttles, one success)", got)
	}
}

func TestNewSDKReadsTheRegionFromIMDSWhenUnset(t *testing.T) {
	imdsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "300")
			fmt.Fprint(w, "token")
		case r.URL.Path == "/latest/dynamic/instance-identity/document" && r.Header.Get("X-Aws-Ec2-Metadata-Token") == "token":
			fmt.Fprint(w, `{"region":"eu-north-1","instanceId":"i-1"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer imdsSrv.Close()
	sdkEnv(t, "http://127.0.0.1:1")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imdsSrv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	api, _, err := NewSDK(ctx, SDKOptions{})
	if err != nil {
		t.Fatalf("building the SDK clients: %v", err)
	}
	if got := api.Options().Region; got != "eu-north-1" {
		t.Errorf("region = %q, want eu-north-1 from IMDS", got)
	}
}
