package ec2sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DescribeInstances, DescribeInstanceTypes and DescribeSubnets.

type xmlInstanceENI struct {
	NetworkInterfaceID string          `xml:"networkInterfaceId"`
	SubnetID           string          `xml:"subnetId"`
	VpcID              string          `xml:"vpcId"`
	Description        string          `xml:"description"`
	OwnerID            string          `xml:"ownerId"`
	Status             string          `xml:"status"`
	MacAddress         string          `xml:"macAddress"`
	PrivateIPAddress   string          `xml:"privateIpAddress"`
	PrivateDNSName     string          `xml:"privateDnsName"`
	SourceDestCheck    bool            `xml:"sourceDestCheck"`
	InterfaceType      string          `xml:"interfaceType"`
	Groups             []xmlGroup      `xml:"groupSet>item"`
	Attachment         *xmlAttachment  `xml:"attachment"`
	PrivateIPs         []xmlPrivateIP  `xml:"privateIpAddressesSet>item"`
	Prefixes           []xmlPrefix     `xml:"ipv4PrefixSet>item"`
	IPv6s              []xmlIPv6       `xml:"ipv6AddressesSet>item"`
	IPv6Prefixes       []xmlIPv6Prefix `xml:"ipv6PrefixSet>item"`
}

type xmlInstance struct {
	InstanceID string `xml:"instanceId"`
	ImageID    string `xml:"imageId"`
	State      struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	PrivateDNSName   string              `xml:"privateDnsName"`
	InstanceType     string              `xml:"instanceType"`
	LaunchTime       string              `xml:"launchTime"`
	Placement        xmlPlacement        `xml:"placement"`
	SubnetID         string              `xml:"subnetId,omitempty"`
	VpcID            string              `xml:"vpcId,omitempty"`
	PrivateIPAddress string              `xml:"privateIpAddress,omitempty"`
	SourceDestCheck  bool                `xml:"sourceDestCheck"`
	Groups           []xmlGroup          `xml:"groupSet>item"`
	Architecture     string              `xml:"architecture"`
	Hypervisor       string              `xml:"hypervisor"`
	Tags             []xmlTag            `xml:"tagSet>item"`
	ENIs             []xmlInstanceENI    `xml:"networkInterfaceSet>item"`
	MetadataOptions  *xmlMetadataOptions `xml:"metadataOptions,omitempty"`
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	meta
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

var instanceAttrs = map[string]attrFunc[*instance]{
	"instance-id":                            func(i *instance) []string { return one(i.ID) },
	"instance-type":                          func(i *instance) []string { return one(i.Type) },
	"availability-zone":                      func(i *instance) []string { return one(i.AZ) },
	"subnet-id":                              func(i *instance) []string { return one(i.SubnetID) },
	"vpc-id":                                 func(i *instance) []string { return one(i.VPCID) },
	"instance-state-name":                    func(i *instance) []string { return one(i.State) },
	"network-interface.network-interface-id": func(i *instance) []string { return mapKeysENI(i.attached) },
	"metadata-options.http-put-response-hop-limit": func(i *instance) []string { return one(strconv.Itoa(i.Metadata.hopLimit)) },
	"metadata-options.http-tokens":                 func(i *instance) []string { return one(i.Metadata.tokens()) },
	"private-ip-address": func(i *instance) []string {
		if i.Primary == nil {
			return nil
		}
		return one(i.Primary.IPs[0].V.String())
	},
}

func mapKeysENI(m map[string]*eni) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (s *Sim) instanceXML(inst *instance) xmlInstance {
	x := xmlInstance{InstanceID: inst.ID, ImageID: "ami-0eniwire0sim00001", InstanceType: inst.Type,
		LaunchTime: ts(inst.Launched), Placement: xmlPlacement{AvailabilityZone: inst.AZ, Tenancy: "default"},
		SourceDestCheck: true, Groups: s.groupsXML(inst.SGs), Architecture: "x86_64", Hypervisor: "nitro",
		Tags: sortedTags(inst.Tags)}
	x.State.Code, x.State.Name = 16, inst.State
	if inst.State == "terminated" {
		x.State.Code = 48
		return x
	}
	x.SubnetID, x.VpcID = inst.SubnetID, inst.VPCID
	x.MetadataOptions = inst.Metadata.xml("applied")
	if p := inst.Primary; p != nil {
		x.PrivateIPAddress = p.IPs[0].V.String()
		x.PrivateDNSName = dnsName(s.cfg.Region, x.PrivateIPAddress)
		x.SourceDestCheck = p.SourceDestCheck
	}
	enis := make([]*eni, 0, len(inst.attached))
	for _, e := range inst.attached {
		enis = append(enis, e)
	}
	sort.Slice(enis, func(i, j int) bool {
		a, b := enis[i].Att, enis[j].Att
		if a.CardIdx != b.CardIdx {
			return a.CardIdx < b.CardIdx
		}
		return a.DeviceIndex < b.DeviceIndex
	})
	for _, e := range enis {
		ex := s.eniXML(e)
		x.ENIs = append(x.ENIs, xmlInstanceENI{NetworkInterfaceID: ex.NetworkInterfaceID, SubnetID: ex.SubnetID,
			VpcID: ex.VpcID, Description: ex.Description, OwnerID: ex.OwnerID, Status: ex.Status,
			MacAddress: ex.MacAddress, PrivateIPAddress: ex.PrivateIPAddress, PrivateDNSName: ex.PrivateDNSName,
			SourceDestCheck: ex.SourceDestCheck, InterfaceType: ex.InterfaceType, Groups: ex.Groups,
			Attachment: ex.Attachment, PrivateIPs: ex.PrivateIPs, Prefixes: ex.Prefixes, IPv6s: ex.IPv6s,
			IPv6Prefixes: ex.IPv6Prefixes})
	}
	return x
}

func (s *Sim) describeInstances(r *request) (response, *APIError) {
	ids := r.list("InstanceId")
	if len(ids) > 0 && r.has("MaxResults") {
		return nil, apiErr(CodeInvalidParameterCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	fs, err := r.filters()
	if err != nil {
		return nil, err
	}
	match, err := compileFilters(fs, instanceAttrs, func(i *instance) map[string]string { return i.Tags })
	if err != nil {
		return nil, err
	}
	pg, err := newPager(r, "i", 5, 1000)
	if err != nil {
		return nil, err
	}
	var cands []*instance
	if len(ids) > 0 {
		seen := map[string]bool{}
		for _, id := range ids {
			if e := checkID(reInstance, CodeInvalidInstanceIDMalformed, id, "i"); e != nil {
				return nil, e
			}
			inst := s.instances[id]
			if inst == nil {
				return nil, errInstanceNotFound(id)
			}
			if !seen[id] {
				seen[id] = true
				cands = append(cands, inst)
			}
		}
	} else {
		for _, inst := range s.instances {
			cands = append(cands, inst)
		}
	}
	var out []*instance
	for _, inst := range cands {
		if match(inst) {
			out = append(out, inst)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	keys := make([]string, len(out))
	for i, inst := range out {
		keys[i] = inst.ID
	}
	lo, hi, next := pg.page(keys)
	resp := &describeInstancesResponse{NextToken: next}
	for _, inst := range out[lo:hi] {
		resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: "r-" + strings.TrimPrefix(inst.ID, "i-"),
			OwnerID: s.cfg.AccountID, Instances: []xmlInstance{s.instanceXML(inst)}})
	}
	return resp, nil
}

type xmlNetworkCard struct {
	NetworkCardIndex         int     `xml:"networkCardIndex"`
	NetworkPerformance       string  `xml:"networkPerformance"`
	MaximumNetworkInterfaces int     `xml:"maximumNetworkInterfaces"`
	BaselineBandwidthInGbps  float64 `xml:"baselineBandwidthInGbps"`
	PeakBandwidthInGbps      float64 `xml:"peakBandwidthInGbps"`
}

type xmlInstanceType struct {
	InstanceType      string `xml:"instanceType"`
	CurrentGeneration bool   `xml:"currentGeneration"`
	Hypervisor        string `xml:"hypervisor"`
	BareMetal         bool   `xml:"bareMetal"`
	VCPUInfo          struct {
		DefaultVCpus int `xml:"defaultVCpus"`
	} `xml:"vCpuInfo"`
	MemoryInfo struct {
		SizeInMiB int `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
	NetworkInfo struct {
		NetworkPerformance        string           `xml:"networkPerformance"`
		MaximumNetworkInterfaces  int              `xml:"maximumNetworkInterfaces"`
		MaximumNetworkCards       int              `xml:"maximumNetworkCards"`
		DefaultNetworkCardIndex   int              `xml:"defaultNetworkCardIndex"`
		NetworkCards              []xmlNetworkCard `xml:"networkCards>item"`
		Ipv4AddressesPerInterface int              `xml:"ipv4AddressesPerInterface"`
		Ipv6AddressesPerInterface int              `xml:"ipv6AddressesPerInterface"`
		Ipv6Supported             bool             `xml:"ipv6Supported"`
		EnaSupport                string           `xml:"enaSupport"`
		EfaSupported              bool             `xml:"efaSupported"`
	} `xml:"networkInfo"`
}

type describeInstanceTypesResponse struct {
	meta
	InstanceTypes []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

func instanceTypeXML(it InstanceType) xmlInstanceType {
	x := xmlInstanceType{InstanceType: it.Name, CurrentGeneration: it.Nitro(), Hypervisor: it.Hypervisor}
	x.VCPUInfo.DefaultVCpus = it.VCPUs
	x.MemoryInfo.SizeInMiB = it.MemoryMiB
	n := &x.NetworkInfo
	n.NetworkPerformance, n.MaximumNetworkInterfaces, n.MaximumNetworkCards = it.Performance, it.MaxENIs, len(it.Cards)
	n.Ipv4AddressesPerInterface, n.Ipv6AddressesPerInterface, n.Ipv6Supported = it.IPv4PerENI, it.IPv6PerENI, true
	n.EnaSupport = "required"
	for i, c := range it.Cards {
		n.NetworkCards = append(n.NetworkCards, xmlNetworkCard{NetworkCardIndex: i, NetworkPerformance: it.Performance,
			MaximumNetworkInterfaces: c, BaselineBandwidthInGbps: it.Baseline / float64(len(it.Cards)),
			PeakBandwidthInGbps: it.Peak / float64(len(it.Cards))})
	}
	return x
}

var instanceTypeAttrs = map[string]attrFunc[InstanceType]{
	"instance-type": func(it InstanceType) []string { return one(it.Name) },
	"network-info.maximum-network-interfaces": func(it InstanceType) []string {
		return one(strconv.Itoa(it.MaxENIs))
	},
	"network-info.ipv4-addresses-per-interface": func(it InstanceType) []string {
		return one(strconv.Itoa(it.IPv4PerENI))
	},
}

func (s *Sim) describeInstanceTypes(r *request) (response, *APIError) {
	names := r.list("InstanceType")
	fs, err := r.filters()
	if err != nil {
		return nil, err
	}
	match, err := compileFilters(fs, instanceTypeAttrs, func(InstanceType) map[string]string { return nil })
	if err != nil {
		return nil, err
	}
	pg, err := newPager(r, "type", 5, 100)
	if err != nil {
		return nil, err
	}
	var cands []InstanceType
	if len(names) > 0 {
		var missing []string
		for _, n := range names {
			it, ok := instanceTypes[n]
			if !ok {
				missing = append(missing, clip(n))
				continue
			}
			cands = append(cands, it)
		}
		if len(missing) > 0 {
			return nil, apiErr(CodeInvalidInstanceType, "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
		}
	} else {
		cands = InstanceTypes()
	}
	var out []InstanceType
	for _, it := range cands {
		if match(it) {
			out = append(out, it)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	keys := make([]string, len(out))
	for i, it := range out {
		keys[i] = it.Name
	}
	lo, hi, next := pg.page(keys)
	resp := &describeInstanceTypesResponse{NextToken: next}
	for _, it := range out[lo:hi] {
		resp.InstanceTypes = append(resp.InstanceTypes, instanceTypeXML(it))
	}
	return resp, nil
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VpcID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CidrBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAz            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	Tags                    []xmlTag `xml:"tagSet>item"`
	// IPv6: the subnet's /64 (none for an IPv4-only subnet); the simulator's subnets are never IPv6-only.
	Ipv6CidrBlockAssociationSet []xmlIPv6BlockAssociation `xml:"ipv6CidrBlockAssociationSet>item"`
	AssignIpv6AddressOnCreation bool                      `xml:"assignIpv6AddressOnCreation"`
	Ipv6Native                  bool                      `xml:"ipv6Native"`
}

type describeSubnetsResponse struct {
	meta
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

var subnetAttrs = map[string]attrFunc[*subnet]{
	"subnet-id":                  func(sn *subnet) []string { return one(sn.ID) },
	"vpc-id":                     func(sn *subnet) []string { return one(sn.VPCID) },
	"availability-zone":          func(sn *subnet) []string { return one(sn.AZ) },
	"cidr-block":                 func(sn *subnet) []string { return one(sn.CIDR.String()) },
	"cidr":                       func(sn *subnet) []string { return one(sn.CIDR.String()) },
	"state":                      func(*subnet) []string { return one("available") },
	"available-ip-address-count": func(sn *subnet) []string { return one(strconv.Itoa(sn.Free())) },
	"availability-zone-id":       func(sn *subnet) []string { return one(azID(sn.AZ)) },
	"default-for-az":             func(*subnet) []string { return one("false") },
	"ipv6-native":                func(*subnet) []string { return one("false") },
	"ipv6-cidr-block-association.ipv6-cidr-block": subnetIPv6Attr(func(sv *subnetIPv6) string { return sv.CIDR.String() }),
	"ipv6-cidr-block-association.association-id":  subnetIPv6Attr(func(sv *subnetIPv6) string { return sv.AssociationID }),
	"ipv6-cidr-block-association.state":           subnetIPv6Attr(func(*subnetIPv6) string { return "associated" }),
}

func subnetIPv6Attr(get func(*subnetIPv6) string) attrFunc[*subnet] {
	return func(sn *subnet) []string {
		if sn.IPv6 == nil {
			return nil
		}
		return one(get(sn.IPv6))
	}
}

func (s *Sim) describeSubnets(r *request) (response, *APIError) {
	ids := r.list("SubnetId")
	fs, err := r.filters()
	if err != nil {
		return nil, err
	}
	match, err := compileFilters(fs, subnetAttrs, func(sn *subnet) map[string]string { return sn.Tags })
	if err != nil {
		return nil, err
	}
	pg, err := newPager(r, "subnet", 5, 1000)
	if err != nil {
		return nil, err
	}
	var cands []*subnet
	if len(ids) > 0 {
		seen := map[string]bool{}
		for _, id := range ids {
			sn := s.subnets[id]
			if sn == nil {
				return nil, errSubnetNotFound(clip(id))
			}
			if !seen[id] {
				seen[id] = true
				cands = append(cands, sn)
			}
		}
	} else {
		for _, sn := range s.subnets {
			cands = append(cands, sn)
		}
	}
	var out []*subnet
	for _, sn := range cands {
		if match(sn) {
			out = append(out, sn)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	keys := make([]string, len(out))
	for i, sn := range out {
		keys[i] = sn.ID
	}
	lo, hi, next := pg.page(keys)
	resp := &describeSubnetsResponse{NextToken: next}
	for _, sn := range out[lo:hi] {
		x := xmlSubnet{SubnetID: sn.ID,
			SubnetArn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.cfg.Region, s.cfg.AccountID, sn.ID), State: "available",
			VpcID: sn.VPCID, OwnerID: s.cfg.AccountID, CidrBlock: sn.CIDR.String(), AvailableIPAddressCount: sn.Free(),
			AvailabilityZone: sn.AZ, AvailabilityZoneID: azID(sn.AZ), Tags: sortedTags(sn.Tags)}
		if sn.IPv6 != nil {
			x.Ipv6CidrBlockAssociationSet = []xmlIPv6BlockAssociation{subnetIPv6XML(sn.IPv6, "associated")}
		}
		resp.Subnets = append(resp.Subnets, x)
	}
	return resp, nil
}

// azID is a stable zone id for a zone name (usw2-az1 for us-west-2a).
func azID(az string) string {
	if az == "" {
		return ""
	}
	letter := az[len(az)-1]
	region := az[:len(az)-1]
	short := region
	if parts := strings.Split(region, "-"); len(parts) == 3 && len(parts[1]) > 0 {
		short = parts[0] + string(parts[1][0]) + parts[2]
	}
	return fmt.Sprintf("%s-az%d", short, int(letter-'a')+1)
}
