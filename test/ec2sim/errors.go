package ec2sim

import (
	"encoding/xml"
	"fmt"
	"net/http"
)

// APIError is an EC2 error as it goes over the wire: code, message and HTTP status.
type APIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
}

// The EC2 error codes the simulator answers.
const (
	CodeAttachmentLimitExceeded      = "AttachmentLimitExceeded"
	CodeInvalidParameterValue        = "InvalidParameterValue"
	CodeInvalidParameterCombination  = "InvalidParameterCombination"
	CodeInvalidENIIDNotFound         = "InvalidNetworkInterfaceID.NotFound"
	CodeInvalidENIIDMalformed        = "InvalidNetworkInterfaceID.Malformed"
	CodeInvalidAttachmentIDNotFound  = "InvalidAttachmentID.NotFound"
	CodeInvalidInstanceIDNotFound    = "InvalidInstanceID.NotFound"
	CodeInvalidInstanceIDMalformed   = "InvalidInstanceID.Malformed"
	CodeInvalidSubnetIDNotFound      = "InvalidSubnetID.NotFound"
	CodeInvalidGroupNotFound         = "InvalidGroup.NotFound"
	CodeInvalidGroupIDMalformed      = "InvalidGroupId.Malformed"
	CodeInvalidVpcIDNotFound         = "InvalidVpcID.NotFound"
	CodeInvalidInstanceType          = "InvalidInstanceType"
	CodeInsufficientFreeAddresses    = "InsufficientFreeAddressesInSubnet"
	CodeInsufficientCidrBlocks       = "InsufficientCidrBlocks"
	CodePrivateIPAddressLimit        = "PrivateIpAddressLimitExceeded"
	CodePrivateIPAddressInUse        = "PrivateIpAddressInUse"
	CodeInvalidIPAddressInUse        = "InvalidIPAddress.InUse"
	CodeInvalidSubnetRange           = "InvalidSubnet.Range"
	CodeInvalidSubnetConflict        = "InvalidSubnet.Conflict"
	CodeCidrLimitExceeded            = "CidrLimitExceeded"
	CodeInvalidNetworkInterfaceInUse = "InvalidNetworkInterface.InUse"
	CodeOperationNotPermitted        = "OperationNotPermitted"
	CodeIdempotentParameterMismatch  = "IdempotentParameterMismatch"
	CodeMissingParameter             = "MissingParameter"
	CodeMissingAction                = "MissingAction"
	CodeInvalidAction                = "InvalidAction"
	CodeUnknownParameter             = "UnknownParameter"
	CodeMalformedQueryString         = "MalformedQueryString"
	CodeInvalidNextToken             = "InvalidNextToken"
	CodeInvalidFilter                = "InvalidFilter"
	CodeRequestLimitExceeded         = "RequestLimitExceeded"
	CodeDryRunOperation              = "DryRunOperation"
	CodeUnauthorizedOperation        = "UnauthorizedOperation"
	CodeInternalError                = "InternalError"
	CodeServiceUnavailable           = "ServiceUnavailable"
	CodeUnavailable                  = "Unavailable"
	CodeIncorrectState               = "IncorrectState"

	// Security groups and their rules (docs/ec2-facts.md, "Error codes").
	CodeInvalidGroupDuplicate              = "InvalidGroup.Duplicate"
	CodeDependencyViolation                = "DependencyViolation"
	CodeCannotDelete                       = "CannotDelete"
	CodeVPCIDNotSpecified                  = "VPCIdNotSpecified"
	CodeInvalidPermissionDuplicate         = "InvalidPermission.Duplicate"
	CodeInvalidPermissionNotFound          = "InvalidPermission.NotFound"
	CodeInvalidPermissionMalformed         = "InvalidPermission.Malformed"
	CodeInvalidSecurityGroupRuleIDNotFound = "InvalidSecurityGroupRuleId.NotFound"
	CodeRulesPerSecurityGroupLimit         = "RulesPerSecurityGroupLimitExceeded"
	CodeSecurityGroupsPerInterfaceLimit    = "SecurityGroupsPerInterfaceLimitExceeded"
)

// statusOf is the HTTP status EC2 sends with a code: server errors are 5xx, authorization 403, the
// rest 400.
func statusOf(code string) int {
	switch code {
	case CodeRequestLimitExceeded, CodeServiceUnavailable, CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeInternalError:
		return http.StatusInternalServerError
	case CodeUnauthorizedOperation:
		return http.StatusForbidden
	case CodeDryRunOperation:
		return http.StatusPreconditionFailed
	}
	return http.StatusBadRequest
}

// defaultMessages are the texts for injected faults, as EC2 words them.
var defaultMessages = map[string]string{
	CodeRequestLimitExceeded:      "Request limit exceeded.",
	CodeInternalError:             "An internal error has occurred",
	CodeServiceUnavailable:        "The service is unavailable. Try again later.",
	CodeUnavailable:               "The server is overloaded and can't handle the request.",
	CodeUnauthorizedOperation:     "You are not authorized to perform this operation.",
	CodeInsufficientFreeAddresses: "The specified subnet does not have enough free addresses to satisfy the request.",
	CodePrivateIPAddressLimit:     "Number of private addresses will exceed limit.",
}

func apiErr(code, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...), Status: statusOf(code)}
}

// faultError builds an injected error with EC2's usual text for the code.
func faultError(code string) *APIError {
	msg, ok := defaultMessages[code]
	if !ok {
		msg = "Injected fault " + code + "."
	}
	return &APIError{Code: code, Message: msg, Status: statusOf(code)}
}

func errENINotFound(id string) *APIError {
	return apiErr(CodeInvalidENIIDNotFound, "The networkInterface ID '%s' does not exist", id)
}

func errAttachmentNotFound(id string) *APIError {
	return apiErr(CodeInvalidAttachmentIDNotFound, "The interface attachment '%s' does not exist.", id)
}

func errInstanceNotFound(id string) *APIError {
	return apiErr(CodeInvalidInstanceIDNotFound, "The instance ID '%s' does not exist", id)
}

// errPrefixesUnsupported refuses /28 prefixes on an instance type that is not built on the Nitro System
// (AWS: "prefixes are supported only on Nitro instances"). The code and text are the simulator's best
// guess: no public source quotes what EC2 answers here.
func errPrefixesUnsupported(instanceType string) *APIError {
	return apiErr(CodeInvalidParameterValue, "Prefix delegation is not supported for instance type %s.", instanceType)
}

func errVPCNotFound(id string) *APIError {
	return apiErr(CodeInvalidVpcIDNotFound, "The vpc ID '%s' does not exist", id)
}

func errSubnetNotFound(id string) *APIError {
	return apiErr(CodeInvalidSubnetIDNotFound, "The subnet ID '%s' does not exist", id)
}

func errGroupNotFound(id string) *APIError {
	return apiErr(CodeInvalidGroupNotFound, "The security group '%s' does not exist", id)
}

// errGroupNotInVPC refuses a security group of another VPC. EC2 answers InvalidGroup.NotFound; the wording
// is the one EC2 uses for a group it cannot find in the VPC the request is about.
func errGroupNotInVPC(id, vpcID string) *APIError {
	return apiErr(CodeInvalidGroupNotFound, "The security group '%s' does not exist in VPC '%s'", id, vpcID)
}

// errGroupNameOutsideDefaultVPC refuses a group named by name: names resolve only in a default VPC, and
// the simulator's VPCs are not default ones (EC2's wording, seen in the field).
func errGroupNameOutsideDefaultVPC(name string) *APIError {
	return apiErr(CodeInvalidGroupNotFound, "The security group '%s' does not exist in default VPC 'none'", clip(name))
}

func errMissing(name string) *APIError {
	return apiErr(CodeMissingParameter, "The request must contain the parameter %s", name)
}

// errorEnvelope is EC2's error body; the SDK matches Errors/Error/Code and RequestID case-sensitively.
type errorEnvelope struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}
