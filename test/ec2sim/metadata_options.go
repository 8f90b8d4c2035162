package ec2sim

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// An instance's metadata options: how IMDS answers it (ModifyInstanceMetadataOptions, and
// MetadataOptions in DescribeInstances).
//
// The hop limit is the IP TTL of IMDS's answer to a token PUT. A packet IMDS sends reaches the instance
// itself with it, and every router on the way on (the instance's host stack forwarding to a container or
// a pod) lowers it, so at 1 the token never reaches anything behind the instance. Only that answer is
// limited: the connection closes after it, and GETs (with a token, or IMDSv1 without one) leave with the
// system's TTL. A new instance has what an AMI with ImdsSupport v2.0 gives (Amazon Linux 2023, the EKS
// AL2023 AMIs): tokens required and hop limit 2. Without such an AMI EC2's default is 1, with tokens
// optional.

const defaultHopLimit = 2

type metadataOptions struct {
	hopLimit int
	// tokensOptional allows IMDSv1: GETs without a token.
	tokensOptional bool
}

func defaultMetadataOptions() metadataOptions { return metadataOptions{hopLimit: defaultHopLimit} }

func (m metadataOptions) tokens() string {
	if m.tokensOptional {
		return "optional"
	}
	return "required"
}

type xmlMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	HTTPProtocolIpv6        string `xml:"httpProtocolIpv6"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

// xml shows the options; state is "pending" in the answer to a change and "applied" once it took effect
// (at once in the simulator).
func (m metadataOptions) xml(state string) *xmlMetadataOptions {
	return &xmlMetadataOptions{State: state, HTTPTokens: m.tokens(), HTTPPutResponseHopLimit: m.hopLimit,
		HTTPEndpoint: "enabled", HTTPProtocolIpv6: "disabled", InstanceMetadataTags: "disabled"}
}

type modifyInstanceMetadataOptionsResponse struct {
	meta
	InstanceID string              `xml:"instanceId"`
	Options    *xmlMetadataOptions `xml:"instanceMetadataOptions"`
}

func (s *Sim) modifyInstanceMetadataOptions(r *request) (response, *APIError) {
	id, e := r.required("InstanceId")
	if e != nil {
		return nil, e
	}
	if e := checkID(reInstance, CodeInvalidInstanceIDMalformed, id, "i"); e != nil {
		return nil, e
	}
	hop, setHop, e := r.int("HttpPutResponseHopLimit", 1, 64)
	if e != nil {
		return nil, e
	}
	tokens := r.str("HttpTokens")
	if r.has("HttpTokens") && tokens != "optional" && tokens != "required" {
		return nil, apiErr(CodeInvalidParameterValue, "The HttpTokens value '%s' is not valid. Specify optional or required.", clip(tokens))
	}
	inst := s.instances[id]
	if inst == nil || inst.State == "terminated" {
		return nil, errInstanceNotFound(id)
	}
	if setHop {
		inst.Metadata.hopLimit = hop
	}
	if tokens != "" {
		inst.Metadata.tokensOptional = tokens == "optional"
	}
	return &modifyInstanceMetadataOptionsResponse{InstanceID: id, Options: inst.Metadata.xml("pending")}, nil
}

// metadataOptionsOf is the instance's current options (the defaults for an unknown instance).
func (s *Sim) metadataOptionsOf(instanceID string) metadataOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inst := s.instances[instanceID]; inst != nil {
		return inst.Metadata
	}
	return defaultMetadataOptions()
}

type imdsConnKey struct{}

// IMDSConnContext is the ConnContext of an http.Server that serves IMDS: it lets the handler give the
// answer to a token PUT the caller's hop limit as its IP TTL. Without it, that answer leaves with the
// system's TTL.
func IMDSConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, imdsConnKey{}, c)
}

// limitTTL sets the IP TTL of the request's connection to hops, when the server gave IMDSConnContext.
func limitTTL(ctx context.Context, hops int) error {
	c, ok := ctx.Value(imdsConnKey{}).(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, hops)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("setting the IP TTL to %d: %w", hops, serr)
	}
	return nil
}
