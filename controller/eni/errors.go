package eni

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// Kinds of failure the pool manager branches on. Every error the Manager returns wraps one of them or is a
// plain I/O error of the journal.
var (
	// ErrTransient: throttled, timed out, dropped, not yet visible. Retry the same step later, with backoff.
	ErrTransient = errors.New("transient EC2 failure")
	// ErrBooksWrong: EC2 disagrees with the books (AttachmentLimitExceeded, a device index in use, an unknown
	// attachment). Reconcile before trying again; never loop.
	ErrBooksWrong = errors.New("books disagree with EC2")
	// ErrSubnetFull: the subnet has no free addresses. Back off; a storm will not make room.
	ErrSubnetFull = errors.New("subnet has no free addresses")
	// ErrNoPrefix: the subnet has free addresses but no free aligned /28 (InsufficientCidrBlocks: it is
	// fragmented). Single IPs still work; prefixes may again once addresses are freed or reserved.
	ErrNoPrefix = errors.New("subnet has no free /28 prefix")
	// ErrNoDeviceIndex: the instance has no free device index for a new ENI (ENIs the books do not count hold
	// the slots). The unused ENI is deleted; creating another will not help until a slot frees.
	ErrNoDeviceIndex = errors.New("no free device index")
	// ErrUnauthorized: IAM denies the call. Retrying will not help until the policy changes.
	ErrUnauthorized = errors.New("not authorized for EC2 call")
	// ErrRejected: any other definite refusal by EC2.
	ErrRejected = errors.New("EC2 rejected the call")
)

// EC2 error codes this package branches on (docs/ec2-facts.md, "Error codes").
const (
	codeThrottled        = "RequestLimitExceeded"
	codeAttachLimit      = "AttachmentLimitExceeded"
	codeInvalidParam     = "InvalidParameterValue"
	codeENINotFound      = "InvalidNetworkInterfaceID.NotFound"
	codeAttachNotFound   = "InvalidAttachmentID.NotFound"
	codeSubnetFull       = "InsufficientFreeAddressesInSubnet"
	codeUnauthorized     = "UnauthorizedOperation"
	codeAuthFailure      = "AuthFailure"
	codeIPLimit          = "PrivateIpAddressLimitExceeded"
	codeInUse            = "InvalidNetworkInterface.InUse"
	codeIncorrectState   = "IncorrectState"
	codeOperationBlocked = "OperationNotPermitted"
	codeNoCidrBlock      = "InsufficientCidrBlocks"
)

// ErrorCode returns the EC2 error code carried by err, or "".
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// mayHaveApplied reports whether a failed call may nevertheless have been applied: no answer came (timeout,
// dropped connection) or EC2 answered with a server error (5xx), after which the change may or may not have
// happened. A throttle is a definite refusal, as is every client error.
func mayHaveApplied(err error) bool {
	if ec2client.IsThrottle(err) {
		return false
	}
	switch ErrorCode(err) {
	case "", "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable":
		return true
	}
	var hs interface{ HTTPStatusCode() int }
	return errors.As(err, &hs) && hs.HTTPStatusCode() >= 500
}

// classify wraps err (from an EC2 call doing what) in its kind.
func classify(what string, err error) error {
	code := ErrorCode(err)
	var kind error
	switch code {
	case "", codeThrottled, "Throttling", "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
		codeENINotFound, codeIncorrectState:
		// No code: the call never got an answer (timeout, dropped response, connection error). NotFound right
		// after a create is EC2's eventual consistency.
		kind = ErrTransient
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: %w", what, err)
		}
	case codeAttachLimit, codeAttachNotFound, codeIPLimit:
		kind = ErrBooksWrong
	case codeSubnetFull:
		kind = ErrSubnetFull
	case codeInvalidParam:
		// In prefix mode a full subnet answers InvalidParameterValue "There aren't sufficient free Ipv4
		// addresses or prefixes" (docs/ec2-facts.md, "Error codes"), not InsufficientFreeAddressesInSubnet.
		kind = ErrRejected
		if strings.Contains(err.Error(), "sufficient free Ipv4 addresses") {
			kind = ErrSubnetFull
		}
	case codeNoCidrBlock:
		kind = ErrNoPrefix
	case codeUnauthorized, codeAuthFailure:
		kind = ErrUnauthorized
	default:
		kind = ErrRejected
	}
	return fmt.Errorf("%s: %w: %w", what, kind, err)
}
