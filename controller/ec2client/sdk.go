package ec2client

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// SDKOptions tunes NewSDK. The zero value reads everything from the environment.
type SDKOptions struct {
	// Region overrides AWS_REGION and the shared config; empty means the SDK's sources, then IMDS.
	Region string
	// Credentials overrides the SDK's default credential chain (environment, web identity, instance role...).
	Credentials aws.CredentialsProvider
	// MaxAttempts is the SDK's own attempts per call for transport errors and 5xx (default 3, the SDK's).
	MaxAttempts int
}

// NewSDK builds the EC2 and IMDS clients the way the SDK reads its environment, so any EC2-compatible endpoint
// works unchanged: AWS_ENDPOINT_URL_EC2 (or AWS_ENDPOINT_URL) for EC2, AWS_EC2_METADATA_SERVICE_ENDPOINT for
// IMDS, AWS_REGION, and the default credential chain. The EC2 client's retryer is the SDK's standard one with
// two changes: no retry quota (ratelimit.None), because the wrapper's limiter governs, and no retry of
// throttles, because the wrapper retries them itself with its own backoff and rate cut. Transport errors and
// 5xx are still retried by the SDK.
func NewSDK(ctx context.Context, opts SDKOptions) (*ec2.Client, *imds.Client, error) {
	var load []func(*config.LoadOptions) error
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	if opts.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(opts.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	// IMDS keeps the SDK's IMDS defaults (short timeouts, 1 s max backoff); only EC2 gets the custom retryer.
	md := imds.NewFromConfig(cfg)
	if cfg.Region == "" {
		out, err := md.GetRegion(ctx, &imds.GetRegionInput{})
		if err != nil {
			return nil, nil, fmt.Errorf("reading the region from IMDS (set AWS_REGION to skip): %w", err)
		}
		cfg.Region = out.Region
	}
	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		o.Retryer = NewSDKRetryer(opts.MaxAttempts)
		next := o.HTTPClient
		if next == nil {
			next = awshttp.NewBuildableClient()
		}
		o.HTTPClient = OwnBodyHTTPClient(next)
	})
	return client, md, nil
}

// NewSDKRetryer is the EC2 client's retryer (see NewSDK): standard, no retry quota, throttles not retried.
// maxAttempts <= 0 means the SDK's default (3).
func NewSDKRetryer(maxAttempts int) aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		if maxAttempts > 0 {
			so.MaxAttempts = maxAttempts
		}
		so.RateLimiter = ratelimit.None
		// The first retryable check that answers wins, so this one, put first, vetoes the SDK's retry of
		// throttles (it matches them by code and by their 503 status) and leaves every other error to the rest.
		so.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			if IsThrottle(err) {
				return aws.FalseTernary
			}
			// A caller's context ending is final too; the SDK already knows, this only keeps it obvious.
			if errors.Is(err, context.Canceled) {
				return aws.FalseTernary
			}
			return aws.UnknownTernary
		})}, so.Retryables...)
	})
}
