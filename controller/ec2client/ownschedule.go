package ec2client

import "context"

type ownScheduleKey struct{}

// WithOwnSchedule returns a context whose EC2 calls are sent once under throttling: a throttled call returns
// its throttle (IsThrottle holds) at once, instead of being retried after the wrapper's backoff. It is for
// callers that retry on their own schedule anyway (the reconcile, the orphan sweep): at 1,000 nodes started
// together, the wrapper's retries of their throttled describes were most of the fleet's describes, sent while
// the account's bucket was dry. The throttle still cuts the action's local rate and is what LastThrottle tells.
func WithOwnSchedule(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownScheduleKey{}, true)
}

// ownSchedule reports whether ctx asks for a single attempt under throttling.
func ownSchedule(ctx context.Context) bool {
	own, _ := ctx.Value(ownScheduleKey{}).(bool)
	return own
}
