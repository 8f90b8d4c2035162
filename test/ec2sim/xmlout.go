package ec2sim

import (
	"bytes"
	"encoding/xml"
	"sort"
	"time"
)

// Response shapes use the element names the SDK's deserializers (and botocore) match. Every response
// embeds meta so the dispatcher can stamp the request id into it.

type meta struct {
	RequestID string `xml:"requestId"`
}

func (m *meta) setRequestID(id string) { m.RequestID = id }

type response interface{ setRequestID(string) }

const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

const isoTime = "2006-01-02T15:04:05.000Z"

func ts(t time.Time) string { return t.UTC().Format(isoTime) }

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName,omitempty"`
	Primary          bool   `xml:"primary"`
}

type xmlPrefix struct {
	Ipv4Prefix string `xml:"ipv4Prefix"`
}

type xmlIPv6 struct {
	Ipv6Address   string `xml:"ipv6Address"`
	IsPrimaryIpv6 bool   `xml:"isPrimaryIpv6"`
}

type xmlIPv6Prefix struct {
	Ipv6Prefix string `xml:"ipv6Prefix"`
}

type xmlAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId,omitempty"`
	InstanceOwnerID     string `xml:"instanceOwnerId,omitempty"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlENI struct {
	NetworkInterfaceID string          `xml:"networkInterfaceId"`
	SubnetID           string          `xml:"subnetId"`
	VpcID              string          `xml:"vpcId"`
	AvailabilityZone   string          `xml:"availabilityZone"`
	Description        string          `xml:"description"`
	OwnerID            string          `xml:"ownerId"`
	RequesterManaged   bool            `xml:"requesterManaged"`
	Status             string          `xml:"status"`
	MacAddress         string          `xml:"macAddress"`
	PrivateIPAddress   string          `xml:"privateIpAddress"`
	PrivateDNSName     string          `xml:"privateDnsName"`
	SourceDestCheck    bool            `xml:"sourceDestCheck"`
	InterfaceType      string          `xml:"interfaceType"`
	Attachment         *xmlAttachment  `xml:"attachment,omitempty"`
	Groups             []xmlGroup      `xml:"groupSet>item"`
	Tags               []xmlTag        `xml:"tagSet>item"`
	PrivateIPs         []xmlPrivateIP  `xml:"privateIpAddressesSet>item"`
	Prefixes           []xmlPrefix     `xml:"ipv4PrefixSet>item"`
	IPv6s              []xmlIPv6       `xml:"ipv6AddressesSet>item"`
	IPv6Prefixes       []xmlIPv6Prefix `xml:"ipv6PrefixSet>item"`
	Ipv6Native         bool            `xml:"ipv6Native"`
}

func dnsName(region, ip string) string {
	b := []byte("ip-" + ip)
	for i := range b {
		if b[i] == '.' {
			b[i] = '-'
		}
	}
	return string(b) + "." + region + ".compute.internal"
}

func sortedTags(m map[string]string) []xmlTag {
	out := make([]xmlTag, 0, len(m))
	for k, v := range m {
		out = append(out, xmlTag{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (s *Sim) groupsXML(ids []string) []xmlGroup {
	out := make([]xmlGroup, len(ids))
	for i, id := range ids {
		name := id
		if g := s.groups[id]; g != nil {
			name = g.Name
		}
		out[i] = xmlGroup{GroupID: id, GroupName: name}
	}
	return out
}

func (s *Sim) eniXML(e *eni) xmlENI {
	x := xmlENI{NetworkInterfaceID: e.ID, SubnetID: e.SubnetID, VpcID: e.VPCID, AvailabilityZone: e.AZ,
		Description: e.Description, OwnerID: s.cfg.AccountID, Status: e.status(), MacAddress: e.MAC,
		PrivateIPAddress: e.IPs[0].V.String(), PrivateDNSName: dnsName(s.cfg.Region, e.IPs[0].V.String()),
		SourceDestCheck: e.SourceDestCheck, InterfaceType: "interface", Groups: s.groupsXML(e.Groups),
		Tags: sortedTags(e.Tags)}
	if a := e.Att; a != nil {
		x.Attachment = &xmlAttachment{AttachmentID: a.ID, InstanceID: a.InstanceID, InstanceOwnerID: s.cfg.AccountID,
			DeviceIndex: a.DeviceIndex, NetworkCardIndex: a.CardIdx, Status: a.Status, AttachTime: ts(a.AttachTime),
			DeleteOnTermination: a.DeleteOnTermination}
	}
	for i, ip := range e.IPs {
		x.PrivateIPs = append(x.PrivateIPs, xmlPrivateIP{PrivateIPAddress: ip.V.String(),
			PrivateDNSName: dnsName(s.cfg.Region, ip.V.String()), Primary: i == 0})
	}
	for _, p := range e.Prefixes {
		x.Prefixes = append(x.Prefixes, xmlPrefix{Ipv4Prefix: p.V.String()})
	}
	for _, a := range e.IPv6s {
		x.IPv6s = append(x.IPv6s, xmlIPv6{Ipv6Address: a.V.String()})
	}
	for _, p := range e.IPv6Prefixes {
		x.IPv6Prefixes = append(x.IPv6Prefixes, xmlIPv6Prefix{Ipv6Prefix: p.V.String()})
	}
	return x
}

type returnResponse struct {
	meta
	Return bool `xml:"return"`
}

func marshalResponse(action, requestID string, v response) ([]byte, error) {
	v.setRequestID(requestID)
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}}}
	if err := enc.EncodeElement(v, start); err != nil {
		return nil, err
	}
	if err := enc.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
