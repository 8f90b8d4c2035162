package ec2client

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/internal/clock"
)

// BenchmarkWrapperOverhead measures what the wrapper adds to a call that never waits: limiter, priority check,
// metrics and AIMD bookkeeping. It reports the direct and wrapped cost per call and their ratio.
func BenchmarkWrapperOverhead(b *testing.B) {
	fake := newFakeEC2(clock.Real{})
	c, _ := newTestClient(b, fake, Config{Buckets: map[string]Bucket{"DescribeSubnets": {RatePerSec: 1e9, Burst: 1e9}}})
	ctx := context.Background()
	in := &ec2.DescribeSubnetsInput{}
	// The fake records every call; reset its log so memory does not grow over the run.
	reset := func() { fake.mu.Lock(); fake.calls = fake.calls[:0]; fake.mu.Unlock() }

	b.ResetTimer()
	began := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := fake.DescribeSubnets(ctx, in); err != nil {
			b.Fatal(err)
		}
		if i%4096 == 0 {
			reset()
		}
	}
	direct := time.Since(began)
	began = time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := c.DescribeSubnets(ctx, in); err != nil {
			b.Fatal(err)
		}
		if i%4096 == 0 {
			reset()
		}
	}
	wrapped := time.Since(began)
	b.StopTimer()
	b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "direct-ns/op")
	b.ReportMetric(float64(wrapped.Nanoseconds())/float64(b.N), "wrapped-ns/op")
	b.ReportMetric(float64(wrapped)/float64(direct), "ratio")
}
