package ec2client

import "context"

// Priority orders the calls that wait for the same action's tokens.
type Priority int

const (
	// Housekeeping is the default: garbage collection, DeleteOnTermination retries, tag repairs, reconciles.
	Housekeeping Priority = iota
	// Urgent marks calls that unblock pods (assigning IPs or adding an ENI while the pool is empty). A waiting
	// urgent call is granted a token before any waiting housekeeping call of the same action.
	Urgent
)

func (p Priority) String() string {
	if p == Urgent {
		return "urgent"
	}
	return "housekeeping"
}

type priorityKey struct{}

// WithPriority returns a context whose EC2 calls wait with priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority ctx carries (Housekeeping when none).
func PriorityFrom(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok && p == Urgent {
		return Urgent
	}
	return Housekeeping
}
