package ec2sim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The Describe actions: ID lists, filters with EC2's * and ? wildcards, and MaxResults/NextToken pages in
// id order. A NextToken names the last id of the previous page and the query it belongs to, so a page
// boundary stays put when resources are added or removed between pages.

// attrFunc returns the values of one filterable attribute of an item.
type attrFunc[T any] func(T) []string

func matchGlob(pattern, s string) bool {
	p, x := 0, 0
	star, mark := -1, 0
	for x < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[x]):
			p++
			x++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, x
			p++
		case star >= 0:
			p = star + 1
			mark++
			x = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// compileFilters turns request filters into one predicate, rejecting names the resource does not have.
func compileFilters[T any](fs []filter, attrs map[string]attrFunc[T], tags func(T) map[string]string) (func(T) bool, *APIError) {
	var preds []func(T) bool
	for _, f := range fs {
		if len(f.Values) == 0 {
			return nil, apiErr(CodeInvalidParameterValue, "The filter '%s' must have at least one value.", clip(f.Name))
		}
		values := f.Values
		var get attrFunc[T]
		switch {
		case strings.HasPrefix(f.Name, "tag:") && len(f.Name) > 4:
			key := f.Name[4:]
			get = func(t T) []string {
				if v, ok := tags(t)[key]; ok {
					return []string{v}
				}
				return nil
			}
		case f.Name == "tag-key":
			get = func(t T) []string { return mapKeys(tags(t)) }
		case f.Name == "tag-value":
			get = func(t T) []string { return mapValues(tags(t)) }
		default:
			get = attrs[f.Name]
			if get == nil {
				return nil, apiErr(CodeInvalidParameterValue, "The filter '%s' is invalid", clip(f.Name))
			}
		}
		preds = append(preds, func(t T) bool {
			for _, have := range get(t) {
				for _, want := range values {
					if matchGlob(want, have) {
						return true
					}
				}
			}
			return false
		})
	}
	return func(t T) bool {
		for _, p := range preds {
			if !p(t) {
				return false
			}
		}
		return true
	}, nil
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func one(s string) []string { return []string{s} }

// pager cuts a sorted result into pages.
type pager struct {
	size  int // 0: everything
	after string
	query string
	kind  string
}

func newPager(r *request, kind string, lo, hi int) (*pager, *APIError) {
	pg := &pager{kind: kind, query: queryHash(r)}
	n, has, err := r.int("MaxResults", lo, hi)
	if err != nil {
		return nil, err
	}
	if has {
		pg.size = n
	}
	if tok, ok := r.p["NextToken"]; ok {
		after, err := pg.decode(tok)
		if err != nil {
			return nil, err
		}
		pg.after = after
		if pg.size == 0 {
			pg.size = hi
		}
	}
	return pg, nil
}

// queryHash covers everything but the page parameters, so a token only continues its own query.
func queryHash(r *request) string {
	keys := make([]string, 0, len(r.p))
	for k := range r.p {
		if k != "NextToken" && k != "MaxResults" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k + "=" + r.p[k] + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func (pg *pager) decode(tok string) (string, *APIError) {
	bad := apiErr(CodeInvalidNextToken, "The specified NextToken is not valid.")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", bad
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 || parts[0] != pg.kind || parts[2] != pg.query || parts[1] == "" {
		return "", bad
	}
	return parts[1], nil
}

// page returns the slice of ids (sorted) to answer and the next token ("" on the last page).
func (pg *pager) page(ids []string) (lo, hi int, next string) {
	if pg.after != "" {
		lo = sort.SearchStrings(ids, pg.after)
		if lo < len(ids) && ids[lo] == pg.after {
			lo++
		}
	}
	hi = len(ids)
	if pg.size > 0 && lo+pg.size < hi {
		hi = lo + pg.size
		next = base64.RawURLEncoding.EncodeToString([]byte(pg.kind + "|" + ids[hi-1] + "|" + pg.query))
	}
	return lo, hi, next
}

var eniAttrs = map[string]attrFunc[*eni]{
	"network-interface-id":         func(e *eni) []string { return one(e.ID) },
	"subnet-id":                    func(e *eni) []string { return one(e.SubnetID) },
	"vpc-id":                       func(e *eni) []string { return one(e.VPCID) },
	"availability-zone":            func(e *eni) []string { return one(e.AZ) },
	"description":                  func(e *eni) []string { return one(e.Description) },
	"status":                       func(e *eni) []string { return one(e.status()) },
	"mac-address":                  func(e *eni) []string { return one(e.MAC) },
	"interface-type":               func(*eni) []string { return one("interface") },
	"requester-managed":            func(*eni) []string { return one("false") },
	"source-dest-check":            func(e *eni) []string { return one(strconv.FormatBool(e.SourceDestCheck)) },
	"group-id":                     func(e *eni) []string { return e.Groups },
	"private-ip-address":           func(e *eni) []string { return ipStrings(e.IPs) },
	"addresses.private-ip-address": func(e *eni) []string { return ipStrings(e.IPs) },
	"ipv4-prefix":                  func(e *eni) []string { return prefixStrings(e.Prefixes) },
	"ipv6-addresses.ipv6-address":  func(e *eni) []string { return ipStrings(e.IPv6s) },
	"attachment.instance-id": func(e *eni) []string {
		if e.Att == nil {
			return nil
		}
		return one(e.Att.InstanceID)
	},
	"attachment.attachment-id": func(e *eni) []string {
		if e.Att == nil {
			return nil
		}
		return one(e.Att.ID)
	},
	"attachment.status": func(e *eni) []string {
		if e.Att == nil {
			return nil
		}
		return one(e.Att.Status)
	},
	"attachment.device-index": func(e *eni) []string {
		if e.Att == nil {
			return nil
		}
		return one(strconv.Itoa(e.Att.DeviceIndex))
	},
	"attachment.delete-on-termination": func(e *eni) []string {
		if e.Att == nil {
			return nil
		}
		return one(strconv.FormatBool(e.Att.DeleteOnTermination))
	},
}

type describeENIsResponse struct {
	meta
	NetworkInterfaces []xmlENI `xml:"networkInterfaceSet>item"`
	NextToken         string   `xml:"nextToken,omitempty"`
}

func (s *Sim) describeNetworkInterfaces(r *request) (response, *APIError) {
	ids := r.list("NetworkInterfaceId")
	if len(ids) > 0 && r.has("MaxResults") {
		return nil, apiErr(CodeInvalidParameterCombination, "The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults")
	}
	fs, err := r.filters()
	if err != nil {
		return nil, err
	}
	match, err := compileFilters(fs, eniAttrs, func(e *eni) map[string]string { return e.Tags })
	if err != nil {
		return nil, err
	}
	pg, err := newPager(r, "eni", 5, 1000)
	if err != nil {
		return nil, err
	}
	now := s.clk.Now()
	var cands []*eni
	switch {
	case len(ids) > 0:
		for _, id := range ids {
			e, err := s.findENILocked(id)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(cands, e) {
				cands = append(cands, e)
			}
		}
	default:
		cands = s.eniCandidatesLocked(fs)
	}
	var out []*eni
	for _, e := range cands {
		if !now.Before(e.VisibleAt) && match(e) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	keys := make([]string, len(out))
	for i, e := range out {
		keys[i] = e.ID
	}
	lo, hi, next := pg.page(keys)
	resp := &describeENIsResponse{NextToken: next}
	lag, assignLag := s.faults.unassignLagDelay(), s.faults.ipv6AssignLagDelay()
	for _, e := range out[lo:hi] {
		x := s.eniXML(e)
		x.PrivateIPs = append(x.PrivateIPs, s.laggingUnassigned(e, now, lag)...)
		if assignLag > 0 {
			x.IPv6Prefixes = slices.DeleteFunc(x.IPv6Prefixes, func(p xmlIPv6Prefix) bool {
				i := slices.IndexFunc(e.IPv6Prefixes, func(q stamped[netip.Prefix]) bool { return q.V.String() == p.Ipv6Prefix })
				return i >= 0 && now.Before(e.IPv6Prefixes[i].Since.Add(assignLag))
			})
		}
		resp.NetworkInterfaces = append(resp.NetworkInterfaces, x)
	}
	return resp, nil
}

// laggingUnassigned are the secondary IPs unassigned from e less than lag ago that e does not hold again: a
// lagging Describe still lists them. Older ones are forgotten.
func (s *Sim) laggingUnassigned(e *eni, now time.Time, lag time.Duration) []xmlPrivateIP {
	e.Unassigned = slices.DeleteFunc(e.Unassigned, func(u stamped[netip.Addr]) bool { return !now.Before(u.Since.Add(lag)) })
	var out []xmlPrivateIP
	for _, u := range e.Unassigned {
		if e.hasIP(u.V) < 0 {
			out = append(out, xmlPrivateIP{PrivateIPAddress: u.V.String(), PrivateDNSName: dnsName(s.cfg.Region, u.V.String())})
		}
	}
	return out
}

// eniCandidatesLocked narrows the scan to the named instances' ENIs when an exact attachment.instance-id
// filter is given (the controller's common query), so a fleet's describes do not scan every ENI.
func (s *Sim) eniCandidatesLocked(fs []filter) []*eni {
	for _, f := range fs {
		if f.Name != "attachment.instance-id" || slices.ContainsFunc(f.Values, func(v string) bool { return strings.ContainsAny(v, "*?") }) {
			continue
		}
		var out []*eni
		for _, id := range f.Values {
			if inst := s.instances[id]; inst != nil {
				for _, e := range inst.attached {
					out = append(out, e)
				}
			}
		}
		return out
	}
	out := make([]*eni, 0, len(s.enis))
	for _, e := range s.enis {
		out = append(out, e)
	}
	return out
}
