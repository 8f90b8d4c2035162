package ec2client

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"
)

// Codes EC2 uses that the wrapper itself acts on.
const (
	CodeRequestLimitExceeded  = "RequestLimitExceeded"
	CodeUnauthorizedOperation = "UnauthorizedOperation"
)

// throttleCodes are the error codes that mean "slow down": EC2's own, and the generic ones an EC2-compatible
// endpoint or a proxy in front of it may answer with.
var throttleCodes = map[string]bool{
	CodeRequestLimitExceeded:   true,
	"Throttling":               true,
	"ThrottlingException":      true,
	"RequestThrottled":         true,
	"EC2ThrottledException":    true,
	"TooManyRequestsException": true,
}

// ErrUnauthorized is matched (errors.Is) by every error the wrapper returns for a call that EC2 denied for
// lack of permission. Such a call is never retried: only a change to the node's IAM policy can fix it.
var ErrUnauthorized = errors.New("EC2 denied the call: the node's IAM role lacks permission")

// UnauthorizedError is the error of a denied call. It unwraps to the SDK's error, so ErrorCode still works.
type UnauthorizedError struct {
	Action string
	Err    error
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("calling %s: %v: %v (grant ec2:%s to the node's IAM role)", e.Action, ErrUnauthorized, e.Err, e.Action)
}

func (e *UnauthorizedError) Unwrap() error        { return e.Err }
func (e *UnauthorizedError) Is(target error) bool { return target == ErrUnauthorized }

// ErrorCode returns the EC2 error code carried by err (e.g. "InvalidNetworkInterfaceID.NotFound"), or "" when
// err holds no API error (nil, transport failures, context ends).
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// IsThrottle reports whether err is EC2 asking the caller to slow down (RequestLimitExceeded and kin).
func IsThrottle(err error) bool { return throttleCodes[ErrorCode(err)] }

// isUnauthorized reports whether err is a permission denial. AuthFailure is EC2's code for bad credentials,
// which no retry fixes either.
func isUnauthorized(err error) bool {
	code := ErrorCode(err)
	return code == CodeUnauthorizedOperation || code == "AuthFailure"
}
