package ec2sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// IMDS: a PUT to /latest/api/token gives a session token (its answer limited to the instance's hop limit,
// metadata_options.go), and every GET must carry it unless the instance's HttpTokens is optional (IMDSv1).
// Answers come from the live state, with the configured lag for newly attached MACs and new addresses.

type imdsToken struct {
	instance string
	expires  time.Time
}

type imdsTokens struct {
	mu sync.Mutex
	m  map[string]imdsToken
}

// IMDSHandler serves the metadata service of one instance.
func (s *Sim) IMDSHandler(instanceID string) http.Handler {
	tokens := &imdsTokens{m: map[string]imdsToken{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveIMDS(w, r, instanceID, tokens)
	})
}

// IMDSHandlerBySource serves the metadata service of every instance at one address, as EC2's link-local
// endpoint does: the caller is the running instance with an attached ENI that holds the request's source
// address (an IPv4 or IPv6 address of the ENI, or one inside an IPv4 or IPv6 prefix of it). Other callers
// get 403; a token is good only for the instance it was issued to.
func (s *Sim) IMDSHandlerBySource() http.Handler {
	tokens := &imdsTokens{m: map[string]imdsToken{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.instanceOfRemote(r.RemoteAddr)
		if !ok {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		s.serveIMDS(w, r, id, tokens)
	})
}

// instanceOfRemote is the running instance whose attached ENI holds the address of remote ("ip:port").
func (s *Sim) instanceOfRemote(remote string) (string, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return "", false
	}
	a := ap.Addr().Unmap()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.ipOwner[a]
	if e == nil && a.Is4() {
		e = s.prefixOwnerLocked(a)
	}
	if e == nil && a.Is6() {
		e = s.ipv6OwnerLocked(a)
	}
	if e == nil {
		return "", false
	}
	inst := s.attachedInstanceLocked(e)
	if inst == nil || inst.State != "running" {
		return "", false
	}
	return inst.ID, true
}

// prefixOwnerLocked is the ENI one of whose prefixes holds a, or nil.
func (s *Sim) prefixOwnerLocked(a netip.Addr) *eni {
	for _, e := range s.enis {
		for _, p := range e.Prefixes {
			if p.V.Contains(a) {
				return e
			}
		}
	}
	return nil
}

func (s *Sim) serveIMDS(w http.ResponseWriter, r *http.Request, instanceID string, tokens *imdsTokens) {
	if r.URL.Path == "/latest/api/token" {
		if r.Method != http.MethodPut {
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			http.Error(w, "Bad Request", http.StatusBadRequest)
			return
		}
		var b [24]byte
		_, _ = rand.Read(b[:])
		tok := "AQAEA" + hex.EncodeToString(b[:])
		tokens.mu.Lock()
		now := s.clk.Now()
		for k, t := range tokens.m { // expired tokens go, so the map stays as small as the live sessions
			if now.After(t.expires) {
				delete(tokens.m, k)
			}
		}
		tokens.m[tok] = imdsToken{instance: instanceID, expires: now.Add(time.Duration(ttl) * time.Second)}
		tokens.mu.Unlock()
		if err := limitTTL(r.Context(), s.metadataOptionsOf(instanceID).hopLimit); err != nil {
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Connection", "close") // later requests come on a connection of the system's TTL
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", strconv.Itoa(ttl))
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(tok))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	token := r.Header.Get("X-aws-ec2-metadata-token")
	tokens.mu.Lock()
	t, ok := tokens.m[token]
	tokens.mu.Unlock()
	imdsV1 := token == "" && s.metadataOptionsOf(instanceID).tokensOptional
	if !imdsV1 && (!ok || t.instance != instanceID || s.clk.Now().After(t.expires)) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	body, ctype, found := s.imdsLookup(instanceID, r.URL.Path)
	if !found {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write([]byte(body))
}

func lines(xs ...string) string { return strings.Join(xs, "\n") }

// imdsLookup answers one metadata path for an instance.
func (s *Sim) imdsLookup(instanceID, path string) (string, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	inst := s.instances[instanceID]
	if inst == nil || inst.State != "running" {
		return "", "", false
	}
	const text = "text/plain"
	if path == "/latest/dynamic/instance-identity/document" {
		doc, _ := json.MarshalIndent(map[string]any{
			"accountId": s.cfg.AccountID, "architecture": "x86_64", "availabilityZone": inst.AZ,
			"billingProducts": nil, "devpayProductCodes": nil, "marketplaceProductCodes": nil,
			"imageId": "ami-0eniwire0sim00001", "instanceId": inst.ID, "instanceType": inst.Type, "kernelId": nil,
			"pendingTime": inst.Launched.UTC().Format(time.RFC3339), "privateIp": inst.Primary.IPs[0].V.String(),
			"ramdiskId": nil, "region": s.cfg.Region, "version": "2017-09-30",
		}, "", "  ")
		return string(doc), "application/json", true
	}
	switch strings.TrimSuffix(path, "/") {
	case "/latest":
		return lines("dynamic", "meta-data"), text, true
	case "/latest/dynamic":
		return "instance-identity/", text, true
	case "/latest/dynamic/instance-identity":
		return "document", text, true
	}
	rest, ok := strings.CutPrefix(path, "/latest/meta-data")
	if !ok {
		return "", "", false
	}
	rest = strings.TrimPrefix(rest, "/")
	primaryIP := inst.Primary.IPs[0].V.String()
	// ipv6 is the primary ENI's first IPv6 address, once IMDS shows it.
	var primaryIPv6 string
	lag := s.faults.imdsLagDelay()
	if v6 := settledStrings(inst.Primary.IPv6s, func(since time.Time) bool { return !s.clk.Now().Before(since.Add(lag)) }); len(v6) > 0 {
		primaryIPv6 = v6[0]
	}
	switch strings.TrimSuffix(rest, "/") {
	case "":
		keys := []string{"ami-id", "hostname", "instance-id", "instance-type", "local-hostname", "local-ipv4", "mac",
			"network/", "placement/", "security-groups", "services/"}
		if primaryIPv6 != "" {
			keys = append(keys, "ipv6")
			sort.Strings(keys)
		}
		return lines(keys...), text, true
	case "ipv6":
		return primaryIPv6, text, primaryIPv6 != ""
	case "ami-id":
		return "ami-0eniwire0sim00001", text, true
	case "instance-id":
		return inst.ID, text, true
	case "instance-type":
		return inst.Type, text, true
	case "hostname", "local-hostname":
		return dnsName(s.cfg.Region, primaryIP), text, true
	case "local-ipv4":
		return primaryIP, text, true
	case "mac":
		return inst.Primary.MAC, text, true
	case "security-groups":
		return lines(groupNames(s, inst.SGs)...), text, true
	case "placement":
		return lines("availability-zone", "availability-zone-id", "region"), text, true
	case "placement/availability-zone":
		return inst.AZ, text, true
	case "placement/availability-zone-id":
		return azID(inst.AZ), text, true
	case "placement/region":
		return s.cfg.Region, text, true
	case "services":
		return "domain", text, true
	case "services/domain":
		return "amazonaws.com", text, true
	case "network":
		return "interfaces/", text, true
	case "network/interfaces":
		return "macs/", text, true
	}
	macPath, ok := strings.CutPrefix(rest, "network/interfaces/macs")
	if !ok {
		return "", "", false
	}
	visible := s.imdsENIsLocked(inst)
	macPath = strings.Trim(macPath, "/")
	if macPath == "" {
		out := make([]string, len(visible))
		for i, e := range visible {
			out[i] = e.MAC + "/"
		}
		return lines(out...), text, true
	}
	mac, field, _ := strings.Cut(macPath, "/")
	for _, e := range visible {
		if e.MAC == mac {
			v, ok := s.imdsMACFieldLocked(inst, e, field)
			return v, text, ok
		}
	}
	return "", "", false
}

func groupNames(s *Sim, ids []string) []string {
	out := make([]string, len(ids))
	for i, x := range s.groupsXML(ids) {
		out[i] = x.GroupName
	}
	return out
}

// imdsENIsLocked lists the ENIs IMDS shows, by device number: attached ones whose attachment is older
// than the IMDS lag (the primary always shows).
func (s *Sim) imdsENIsLocked(inst *instance) []*eni {
	lag := s.faults.imdsLagDelay()
	now := s.clk.Now()
	var out []*eni
	for _, e := range inst.attached {
		if e.Att.Status == "attaching" {
			continue
		}
		if e != inst.Primary && now.Before(e.Att.AttachedAt.Add(lag)) {
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Att, out[j].Att
		if a.CardIdx != b.CardIdx {
			return a.CardIdx < b.CardIdx
		}
		return a.DeviceIndex < b.DeviceIndex
	})
	return out
}

// settledStrings are the values that IMDS shows already (settled says which), as strings.
func settledStrings[T interface{ String() string }](xs []stamped[T], settled func(since time.Time) bool) []string {
	var out []string
	for _, x := range xs {
		if settled(x.Since) {
			out = append(out, x.V.String())
		}
	}
	return out
}

func (s *Sim) imdsMACFieldLocked(inst *instance, e *eni, field string) (string, bool) {
	lag := s.faults.imdsLagDelay()
	now := s.clk.Now()
	sn := s.subnets[e.SubnetID]
	vpc := s.vpcs[e.VPCID]
	multiCard := len(instanceTypes[inst.Type].Cards) > 1
	settled := func(since time.Time) bool { return !now.Before(since.Add(lag)) }
	prefixes := settledStrings(e.Prefixes, settled)
	ipv6s := settledStrings(e.IPv6s, settled)
	ipv6Prefixes := settledStrings(e.IPv6Prefixes, settled)
	var subnetIPv6 []string
	if sn.IPv6 != nil {
		subnetIPv6 = []string{sn.IPv6.CIDR.String()}
	}
	vpcIPv6 := vpc.ipv6BlockList()
	switch strings.TrimSuffix(field, "/") {
	case "":
		keys := []string{"device-number", "interface-id", "local-hostname", "local-ipv4s", "mac", "owner-id",
			"security-group-ids", "security-groups", "subnet-id", "subnet-ipv4-cidr-block", "vpc-id",
			"vpc-ipv4-cidr-block", "vpc-ipv4-cidr-blocks"}
		for k, vals := range map[string][]string{"ipv4-prefix": prefixes, "ipv6s": ipv6s, "ipv6-prefix": ipv6Prefixes,
			"subnet-ipv6-cidr-blocks": subnetIPv6, "vpc-ipv6-cidr-blocks": vpcIPv6} {
			if len(vals) > 0 {
				keys = append(keys, k)
			}
		}
		if multiCard {
			keys = append(keys, "network-card")
		}
		sort.Strings(keys)
		return lines(keys...), true
	case "device-number":
		return strconv.Itoa(e.Att.DeviceIndex), true
	case "network-card":
		return strconv.Itoa(e.Att.CardIdx), multiCard
	case "interface-id":
		return e.ID, true
	case "local-hostname":
		return dnsName(s.cfg.Region, e.IPs[0].V.String()), true
	case "local-ipv4s":
		ips := []string{e.IPs[0].V.String()}
		for _, ip := range e.IPs[1:] {
			if !now.Before(ip.Since.Add(lag)) {
				ips = append(ips, ip.V.String())
			}
		}
		return lines(ips...), true
	case "ipv4-prefix":
		return lines(prefixes...), len(prefixes) > 0
	case "ipv6s":
		return lines(ipv6s...), len(ipv6s) > 0
	case "ipv6-prefix":
		return lines(ipv6Prefixes...), len(ipv6Prefixes) > 0
	case "subnet-ipv6-cidr-blocks":
		return lines(subnetIPv6...), len(subnetIPv6) > 0
	case "vpc-ipv6-cidr-blocks":
		return lines(vpcIPv6...), len(vpcIPv6) > 0
	case "mac":
		return e.MAC, true
	case "owner-id":
		return s.cfg.AccountID, true
	case "security-group-ids":
		return lines(e.Groups...), true
	case "security-groups":
		return lines(groupNames(s, e.Groups)...), true
	case "subnet-id":
		return sn.ID, true
	case "subnet-ipv4-cidr-block":
		return sn.CIDR.String(), true
	case "vpc-id":
		return vpc.ID, true
	case "vpc-ipv4-cidr-block":
		return vpc.CIDR.String(), true
	case "vpc-ipv4-cidr-blocks":
		return lines(vpc.blockList()...), true
	}
	return "", false
}
