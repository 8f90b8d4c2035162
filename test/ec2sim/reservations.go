package ec2sim

import (
	"net/netip"
	"sort"
)

// Subnet CIDR reservations: CreateSubnetCidrReservation, GetSubnetCidrReservations and
// DeleteSubnetCidrReservation. A reservation keeps its addresses from requests for a count of secondary IPs
// (and from new ENIs' primaries); an explicit one leaves them to requests that name them, a prefix one is
// where requests for a count of prefixes take /28s from first. Addresses already in use when the
// reservation is made stay with their owners.

type resvType uint8

const (
	resvNone resvType = iota
	resvPrefix
	resvExplicit
)

var resvTypes = map[string]resvType{"prefix": resvPrefix, "explicit": resvExplicit}

func (t resvType) String() string {
	for name, v := range resvTypes {
		if v == t {
			return name
		}
	}
	return ""
}

type cidrReservation struct {
	ID, SubnetID, Description string
	CIDR                      netip.Prefix
	Type                      resvType
	Tags                      map[string]string
}

func (r *cidrReservation) size() uint32 { return 1 << (32 - r.CIDR.Bits()) }

type xmlCidrReservation struct {
	ID              string   `xml:"subnetCidrReservationId"`
	SubnetID        string   `xml:"subnetId"`
	CIDR            string   `xml:"cidr"`
	ReservationType string   `xml:"reservationType"`
	OwnerID         string   `xml:"ownerId"`
	Description     string   `xml:"description,omitempty"`
	Tags            []xmlTag `xml:"tagSet>item"`
}

type createReservationResponse struct {
	meta
	Reservation xmlCidrReservation `xml:"subnetCidrReservation"`
}

type getReservationsResponse struct {
	meta
	IPv4      []xmlCidrReservation `xml:"subnetIpv4CidrReservationSet>item"`
	NextToken string               `xml:"nextToken,omitempty"`
}

type deleteReservationResponse struct {
	meta
	Deleted xmlCidrReservation `xml:"deletedSubnetCidrReservation"`
}

func (s *Sim) reservationXML(r *cidrReservation) xmlCidrReservation {
	return xmlCidrReservation{ID: r.ID, SubnetID: r.SubnetID, CIDR: r.CIDR.String(), ReservationType: r.Type.String(),
		OwnerID: s.cfg.AccountID, Description: r.Description, Tags: sortedTags(r.Tags)}
}

func (s *Sim) requiredSubnet(r *request) (*subnet, *APIError) {
	id, err := r.required("SubnetId")
	if err != nil {
		return nil, err
	}
	sn := s.subnets[id]
	if sn == nil {
		return nil, apiErr(CodeInvalidSubnetIDNotFound, "The subnet ID '%s' does not exist", clip(id))
	}
	return sn, nil
}

func (s *Sim) createSubnetCidrReservation(r *request) (response, *APIError) {
	sn, err := s.requiredSubnet(r)
	if err != nil {
		return nil, err
	}
	cidr, err := r.required("Cidr")
	if err != nil {
		return nil, err
	}
	typ, err := r.required("ReservationType")
	if err != nil {
		return nil, err
	}
	kind, ok := resvTypes[typ]
	if !ok {
		return nil, apiErr(CodeInvalidParameterValue, "Value (%s) for parameter reservationType is invalid. Valid values: prefix, explicit.", clip(typ))
	}
	p, perr := netip.ParsePrefix(cidr)
	if perr != nil || !p.Addr().Is4() || p.Masked() != p {
		return nil, apiErr(CodeInvalidParameterValue, "Value (%s) for parameter cidr is invalid.", clip(cidr))
	}
	if !sn.CIDR.Contains(p.Addr()) || p.Bits() < sn.CIDR.Bits() {
		return nil, apiErr(CodeInvalidParameterValue, "The CIDR %s is not within the subnet %s (%s).", p, sn.ID, sn.CIDR)
	}
	for _, o := range sn.reservations {
		if o.CIDR.Overlaps(p) {
			return nil, apiErr(CodeInvalidParameterValue, "The CIDR %s overlaps with the subnet CIDR reservation %s.", p, o.ID)
		}
	}
	desc := r.str("Description")
	tags, err := tagSpecs(r, "subnet-cidr-reservation")
	if err != nil {
		return nil, err
	}
	res := &cidrReservation{ID: s.newID("scr", s.reservationTaken), SubnetID: sn.ID, Description: desc, CIDR: p,
		Type: kind, Tags: map[string]string{}}
	for _, t := range tags {
		res.Tags[t.Key] = t.Value
	}
	off, _ := sn.offset(p.Addr())
	for i := off; i < off+res.size(); i++ {
		sn.resv[i] = kind
	}
	sn.reservations = append(sn.reservations, res)
	s.log.Info("subnet CIDR reserved", "reservation", res.ID, "subnet", sn.ID, "cidr", p, "type", typ)
	return &createReservationResponse{Reservation: s.reservationXML(res)}, nil
}

func (s *Sim) reservationTaken(id string) bool {
	_, _, ok := s.findReservationLocked(id)
	return ok
}

func (s *Sim) findReservationLocked(id string) (*subnet, int, bool) {
	for _, sn := range s.subnets {
		for i, r := range sn.reservations {
			if r.ID == id {
				return sn, i, true
			}
		}
	}
	return nil, 0, false
}

var reservationAttrs = map[string]attrFunc[*cidrReservation]{
	"reservationType":            func(r *cidrReservation) []string { return one(r.Type.String()) },
	"subnet-cidr-reservation-id": func(r *cidrReservation) []string { return one(r.ID) },
	"subnet-id":                  func(r *cidrReservation) []string { return one(r.SubnetID) },
}

func (s *Sim) getSubnetCidrReservations(r *request) (response, *APIError) {
	sn, err := s.requiredSubnet(r)
	if err != nil {
		return nil, err
	}
	fs, err := r.filters()
	if err != nil {
		return nil, err
	}
	match, err := compileFilters(fs, reservationAttrs, func(r *cidrReservation) map[string]string { return r.Tags })
	if err != nil {
		return nil, err
	}
	pg, err := newPager(r, "subnet-cidr-reservation", 5, 1000)
	if err != nil {
		return nil, err
	}
	var out []*cidrReservation
	for _, res := range sn.reservations {
		if match(res) {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	keys := make([]string, len(out))
	for i, res := range out {
		keys[i] = res.ID
	}
	lo, hi, next := pg.page(keys)
	resp := &getReservationsResponse{NextToken: next}
	for _, res := range out[lo:hi] {
		resp.IPv4 = append(resp.IPv4, s.reservationXML(res))
	}
	return resp, nil
}

func (s *Sim) deleteSubnetCidrReservation(r *request) (response, *APIError) {
	id, err := r.required("SubnetCidrReservationId")
	if err != nil {
		return nil, err
	}
	sn, i, ok := s.findReservationLocked(id)
	if !ok {
		return nil, apiErr("InvalidSubnetCidrReservationID.NotFound", "The subnet CIDR reservation ID '%s' does not exist", clip(id))
	}
	res := sn.reservations[i]
	sn.reservations = append(sn.reservations[:i], sn.reservations[i+1:]...)
	off, _ := sn.offset(res.CIDR.Addr())
	for j := off; j < off+res.size(); j++ {
		sn.resv[j] = resvNone
	}
	s.log.Info("subnet CIDR reservation deleted", "reservation", res.ID, "subnet", sn.ID)
	return &deleteReservationResponse{Deleted: s.reservationXML(res)}, nil
}
