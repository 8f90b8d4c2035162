package ec2sim

import (
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
)

// ActionCounters count the calls of one action as the simulator saw them.
type ActionCounters struct {
	Calls     int64            `json:"calls"`
	Throttled int64            `json:"throttled"`
	Errors    map[string]int64 `json:"errors,omitempty"`
	Dropped   int64            `json:"dropped,omitempty"`
}

// Counters are per action; requests that named no valid action count under "".
type Counters map[string]ActionCounters

// Counters returns a copy of the per-action counters.
func (s *Sim) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(Counters, len(s.counters))
	for k, c := range s.counters {
		cp := *c
		cp.Errors = make(map[string]int64, len(c.Errors))
		for code, n := range c.Errors {
			cp.Errors[code] = n
		}
		out[k] = cp
	}
	return out
}

func (s *Sim) counterLocked(action string) *ActionCounters {
	c := s.counters[action]
	if c == nil {
		c = &ActionCounters{Errors: map[string]int64{}}
		s.counters[action] = c
	}
	return c
}

func (s *Sim) countError(action, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counterLocked(action).Errors[code]++
}

var reqSeq atomic.Uint64

func (s *Sim) requestID() string {
	n := reqSeq.Add(1)
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(s.cfg.Seed), uint16(n>>48), uint16(n>>36)&0xfff,
		uint16(n>>24)&0xfff, n&0xffffffffffff)
}

const maxBody = 1 << 20

// EC2Handler serves the EC2 Query API: form-encoded POST (or GET with a query string) to any path.
func (s *Sim) EC2Handler() http.Handler { return http.HandlerFunc(s.serveEC2) }

func (s *Sim) serveEC2(w http.ResponseWriter, r *http.Request) {
	reqID := s.requestID()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		s.countError("", CodeMalformedQueryString)
		writeError(w, reqID, apiErr(CodeMalformedQueryString, "The request body could not be read or exceeds 1 MiB."))
		return
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.countError("", CodeMalformedQueryString)
		writeError(w, reqID, apiErr(CodeMalformedQueryString, "The query string contains a syntax error."))
		return
	}
	req, aerr := decodeRequest(body, query)
	if aerr != nil {
		action := ""
		if aerr.Code == CodeUnknownParameter || aerr.Code == CodeDryRunOperation {
			action = query.Get("Action")
			if v, e := url.ParseQuery(string(body)); e == nil && v.Get("Action") != "" {
				action = v.Get("Action")
			}
		}
		s.countError(action, aerr.Code)
		writeError(w, reqID, aerr)
		return
	}
	if d := s.faults.latencyFor(req.Action); d > 0 {
		if err := s.clk.Sleep(r.Context(), d); err != nil {
			return
		}
	}
	s.mu.Lock()
	c := s.counterLocked(req.Action)
	c.Calls++
	if !s.allowLocked(regionOf(r.Header.Get("Authorization"), s.cfg.Region), s.bucketKey(req)) {
		c.Throttled++
		c.Errors[CodeRequestLimitExceeded]++
		s.mu.Unlock()
		writeError(w, reqID, faultError(CodeRequestLimitExceeded))
		return
	}
	s.mu.Unlock()
	if fe := s.faults.errorFor(req.Action); fe != nil {
		s.countError(req.Action, fe.Code)
		writeError(w, reqID, fe)
		return
	}
	drop := s.faults.takeDrop(req.Action)
	out, aerr := s.dispatch(req)
	if aerr != nil {
		s.countError(req.Action, aerr.Code)
	}
	if drop {
		s.mu.Lock()
		s.counterLocked(req.Action).Dropped++
		s.mu.Unlock()
		resetConnection(w)
		return
	}
	if aerr != nil {
		writeError(w, reqID, aerr)
		return
	}
	if fe := s.faults.takeAfterApply(req.Action); fe != nil {
		s.countError(req.Action, fe.Code)
		writeError(w, reqID, fe)
		return
	}
	b, err := marshalResponse(req.Action, reqID, out)
	if err != nil {
		writeError(w, reqID, apiErr(CodeInternalError, "An internal error has occurred"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/xml;charset=UTF-8")
	h.Set("x-amzn-RequestId", reqID)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// resetConnection drops the answer: the client sees its connection reset after the change was applied.
func resetConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func writeError(w http.ResponseWriter, reqID string, e *APIError) {
	body, _ := xml.Marshal(errorEnvelope{Code: e.Code, Message: e.Message, RequestID: reqID})
	h := w.Header()
	h.Set("Content-Type", "text/xml;charset=UTF-8")
	h.Set("x-amzn-RequestId", reqID)
	w.WriteHeader(e.Status)
	_, _ = w.Write(append([]byte(xml.Header), body...))
}

func (s *Sim) dispatch(r *request) (response, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	switch r.Action {
	case "CreateNetworkInterface":
		return s.createNetworkInterface(r)
	case "AttachNetworkInterface":
		return s.attachNetworkInterface(r)
	case "DetachNetworkInterface":
		return s.detachNetworkInterface(r)
	case "DeleteNetworkInterface":
		return s.deleteNetworkInterface(r)
	case "ModifyNetworkInterfaceAttribute":
		return s.modifyNetworkInterfaceAttribute(r)
	case "DescribeNetworkInterfaces":
		return s.describeNetworkInterfaces(r)
	case "AssignPrivateIpAddresses":
		return s.assignPrivateIPAddresses(r)
	case "UnassignPrivateIpAddresses":
		return s.unassignPrivateIPAddresses(r)
	case "AssignIpv6Addresses":
		return s.assignIPv6Addresses(r)
	case "UnassignIpv6Addresses":
		return s.unassignIPv6Addresses(r)
	case "AssociateVpcCidrBlock":
		return s.associateVpcCidrBlock(r)
	case "AssociateSubnetCidrBlock":
		return s.associateSubnetCidrBlock(r)
	case "CreateTags":
		return s.changeTags(r, true)
	case "DeleteTags":
		return s.changeTags(r, false)
	case "DescribeInstances":
		return s.describeInstances(r)
	case "ModifyInstanceMetadataOptions":
		return s.modifyInstanceMetadataOptions(r)
	case "DescribeInstanceTypes":
		return s.describeInstanceTypes(r)
	case "DescribeSubnets":
		return s.describeSubnets(r)
	case "DescribeVpcs":
		return s.describeVpcs(r)
	case "DescribeSecurityGroups":
		return s.describeSecurityGroups(r)
	case "CreateSubnetCidrReservation":
		return s.createSubnetCidrReservation(r)
	case "GetSubnetCidrReservations":
		return s.getSubnetCidrReservations(r)
	case "DeleteSubnetCidrReservation":
		return s.deleteSubnetCidrReservation(r)
	case "CreateSecurityGroup":
		return s.createSecurityGroup(r)
	case "DeleteSecurityGroup":
		return s.deleteSecurityGroup(r)
	case "AuthorizeSecurityGroupIngress":
		return s.authorizeSecurityGroup(r, false)
	case "AuthorizeSecurityGroupEgress":
		return s.authorizeSecurityGroup(r, true)
	case "RevokeSecurityGroupIngress":
		return s.revokeSecurityGroup(r, false)
	case "RevokeSecurityGroupEgress":
		return s.revokeSecurityGroup(r, true)
	}
	return nil, apiErr(CodeInvalidAction, "The action %s is not valid for this web service.", clip(r.Action))
}
