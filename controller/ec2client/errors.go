package ec2client

// The project's one vocabulary of EC2 errors: the codes it tells apart, the kind each one is (what a caller
// does next), whether a failed call may nevertheless have been applied, and whether EC2 asks the caller to
// slow down. Every package asks these predicates; none keeps a list of codes of its own.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"
)

// EC2 error codes the project branches on (docs/ec2-facts.md, "Error codes").
const (
	CodeRequestLimitExceeded      = "RequestLimitExceeded"
	CodeUnauthorizedOperation     = "UnauthorizedOperation"
	CodeAuthFailure               = "AuthFailure"
	CodeInternalError             = "InternalError"
	CodeInternalFailure           = "InternalFailure"
	CodeServiceUnavailable        = "ServiceUnavailable"
	CodeUnavailable               = "Unavailable"
	CodeENINotFound               = "InvalidNetworkInterfaceID.NotFound"
	CodeAttachmentNotFound        = "InvalidAttachmentID.NotFound"
	CodeIncorrectState            = "IncorrectState"
	CodeAttachmentLimitExceeded   = "AttachmentLimitExceeded"
	CodePrivateIPAddressLimit     = "PrivateIpAddressLimitExceeded"
	CodeInsufficientFreeAddresses = "InsufficientFreeAddressesInSubnet"
	CodeInsufficientCidrBlocks    = "InsufficientCidrBlocks"
	CodeInvalidParameterValue     = "InvalidParameterValue"
	CodeENIInUse                  = "InvalidNetworkInterface.InUse"
)

// Kinds of EC2 failure callers branch on. Classify wraps an error in its kind; errors.Is tells them apart.
var (
	// ErrTransient: throttled, timed out, dropped, not yet visible. Retry the same step later, with backoff.
	ErrTransient = errors.New("transient EC2 failure")
	// ErrBooksWrong: EC2 disagrees with the caller's books of the instance (AttachmentLimitExceeded, an
	// address limit, an unknown attachment). Reconcile before trying again; never loop.
	ErrBooksWrong = errors.New("books disagree with EC2")
	// ErrSubnetFull: the subnet has no free addresses. Back off; a storm will not make room.
	ErrSubnetFull = errors.New("subnet has no free addresses")
	// ErrNoPrefix: the subnet has free addresses but no free aligned /28 (InsufficientCidrBlocks: it is
	// fragmented). Single IPs still work; prefixes may again once addresses are freed or reserved.
	ErrNoPrefix = errors.New("subnet has no free /28 prefix")
	// ErrUnauthorized: IAM denies the call (UnauthorizedOperation), or the credentials are bad (AuthFailure).
	// Retrying will not help until the node's IAM policy changes; the wrapper never retries it.
	ErrUnauthorized = errors.New("EC2 denied the call: the node's IAM role lacks permission")
	// ErrRejected: any other definite refusal by EC2.
	ErrRejected = errors.New("EC2 rejected the call")
)

// class is what the vocabulary knows of one code.
type class struct {
	kind error
	// throttle: EC2 asks the caller to slow down; it refused the call without applying it.
	throttle bool
	// serverError: EC2 failed on its side, after which the change may or may not have happened.
	serverError bool
}

// vocabulary holds every code the project tells apart. A code not listed is ErrRejected; an error with no
// code at all (no answer came: a timeout, a dropped connection) is ErrTransient and may have been applied.
var vocabulary = map[string]class{
	// EC2's throttle, and the generic ones an EC2-compatible endpoint or a proxy in front of it may answer with.
	CodeRequestLimitExceeded:   {kind: ErrTransient, throttle: true},
	"Throttling":               {kind: ErrTransient, throttle: true},
	"ThrottlingException":      {kind: ErrTransient, throttle: true},
	"RequestThrottled":         {kind: ErrTransient, throttle: true},
	"EC2ThrottledException":    {kind: ErrTransient, throttle: true},
	"TooManyRequestsException": {kind: ErrTransient, throttle: true},

	CodeInternalError:      {kind: ErrTransient, serverError: true},
	CodeInternalFailure:    {kind: ErrTransient, serverError: true},
	CodeServiceUnavailable: {kind: ErrTransient, serverError: true},
	CodeUnavailable:        {kind: ErrTransient, serverError: true},

	// NotFound right after a create is EC2's eventual consistency.
	CodeENINotFound:    {kind: ErrTransient},
	CodeIncorrectState: {kind: ErrTransient},

	CodeAttachmentLimitExceeded: {kind: ErrBooksWrong},
	CodeAttachmentNotFound:      {kind: ErrBooksWrong},
	CodePrivateIPAddressLimit:   {kind: ErrBooksWrong},

	CodeInsufficientFreeAddresses: {kind: ErrSubnetFull},
	CodeInsufficientCidrBlocks:    {kind: ErrNoPrefix},

	CodeUnauthorizedOperation: {kind: ErrUnauthorized},
	CodeAuthFailure:           {kind: ErrUnauthorized},

	// Also a full subnet in prefix mode; KindOf reads the message.
	CodeInvalidParameterValue: {kind: ErrRejected},
	CodeENIInUse:              {kind: ErrRejected},
}

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
func IsThrottle(err error) bool { return vocabulary[ErrorCode(err)].throttle }

// isUnauthorized reports whether err is a permission denial or a credentials failure.
func isUnauthorized(err error) bool { return vocabulary[ErrorCode(err)].kind == ErrUnauthorized }

// KindOf returns the kind of err, the error of a failed EC2 call: one of ErrTransient, ErrBooksWrong,
// ErrSubnetFull, ErrNoPrefix, ErrUnauthorized and ErrRejected, or nil when err is nil or is the caller's own
// context canceled while no definite answer had come.
func KindOf(err error) error {
	if err == nil {
		return nil
	}
	code := ErrorCode(err)
	kind := ErrTransient
	if code != "" {
		kind = vocabulary[code].kind
	}
	switch {
	case kind == nil:
		kind = ErrRejected
	case kind == ErrTransient && errors.Is(err, context.Canceled):
		return nil
	case code == CodeInvalidParameterValue && strings.Contains(err.Error(), "sufficient free Ipv4 addresses"):
		// In prefix mode a full subnet answers InvalidParameterValue "There aren't sufficient free Ipv4
		// addresses or prefixes" (docs/ec2-facts.md, "Error codes"), not InsufficientFreeAddressesInSubnet.
		kind = ErrSubnetFull
	}
	return kind
}

// Classify wraps err (from an EC2 call doing what) in its kind (KindOf), so that callers branch with
// errors.Is and still read the code with ErrorCode.
func Classify(what string, err error) error {
	kind := KindOf(err)
	if kind == nil || errors.Is(err, kind) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, kind, err)
}

// MayHaveApplied reports whether a failed call may nevertheless have been applied: no answer came (timeout,
// dropped connection) or EC2 answered with a server error (5xx), after which the change may or may not have
// happened. A throttle is a definite refusal, as is every client error.
func MayHaveApplied(err error) bool {
	if err == nil || IsThrottle(err) {
		return false
	}
	code := ErrorCode(err)
	if code == "" || vocabulary[code].serverError {
		return true
	}
	var hs interface{ HTTPStatusCode() int }
	return errors.As(err, &hs) && hs.HTTPStatusCode() >= 500
}

// UnauthorizedError is the wrapper's error for a denied call (errors.Is(err, ErrUnauthorized)). It unwraps to
// the SDK's error, so ErrorCode still works.
type UnauthorizedError struct {
	Action string
	Err    error
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("calling %s: %v: %v (grant ec2:%s to the node's IAM role)", e.Action, ErrUnauthorized, e.Err, e.Action)
}

func (e *UnauthorizedError) Unwrap() error        { return e.Err }
func (e *UnauthorizedError) Is(target error) bool { return target == ErrUnauthorized }
