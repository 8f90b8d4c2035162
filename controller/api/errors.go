package api

import (
	"errors"
	"fmt"
)

// Error codes the agent answers with. The plugin maps them to CNI error codes.
const (
	// CodeNoIPAvailable: the pool has no free IP right now; the pool manager has been woken. Retryable.
	CodeNoIPAvailable = "no_ip_available"
	// CodeMaxPods: the pods on the node hold as many IPs as its max pods allows. Retryable once pods leave.
	CodeMaxPods = "max_pods_reached"
	// CodeNotReady: the agent has not finished start-up (journal replay, first EC2 answer). Retryable.
	CodeNotReady = "not_ready"
	// CodeNotFound: no assignment for the attachment.
	CodeNotFound = "not_found"
	// CodeBadRequest: the request is malformed or misses a field.
	CodeBadRequest = "bad_request"
	// CodeHostVethGone: the host veth the request names is gone or being removed (the pair of a released
	// sandbox that the ADD found); the plugin makes a new pair and asks again. Retryable.
	CodeHostVethGone = "host_veth_gone"
	// CodeInternal: anything else.
	CodeInternal = "internal"
)

// Error is the body of every non-2xx answer, and the error the client returns for one.
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// ErrorCode returns the agent error code carried by err, or "" when err is not an *Error.
func ErrorCode(err error) string {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// ErrUnreachable wraps every failure to reach the agent at all (no socket, connection refused, timeout).
var ErrUnreachable = errors.New("agent unreachable")
