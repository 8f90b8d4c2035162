package subnet

// Subnet discovery (ENABLE_SUBNET_DISCOVERY, the AWS VPC CNI's setting): new ENIs go to the subnet of the
// node's VPC and zone with the most free addresses among the node's own subnet and the subnets tagged
// kubernetes.io/role/cni=1, so a cluster short of addresses grows into subnets added for pods (often in a
// secondary VPC CIDR) without a restart. The list costs one DescribeSubnets per refresh, not one per ENI: it
// is cached, refreshed at most every subnetRefreshEvery, and after a subnet refused a create for want of
// addresses (InsufficientFreeAddressesInSubnet), which also moves the next ENI to the next subnet. Every
// subnet a refresh reads goes into the node's one cache of subnets (cache.go), candidate or not.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/internal/clock"
)

// Tags that decide which subnets discovery may use, as the AWS VPC CNI reads them.
const (
	// TagCNIRole: "1" makes a subnet of the node's zone a candidate, "0" excludes one (the node's own too).
	TagCNIRole = "kubernetes.io/role/cni"
	// A subnet carrying tags with these prefixes is for the clusters they name only (kubernetes.io/cluster/
	// <name>, or the AWS VPC CNI's cni.networking.k8s.aws/cluster/<name>).
	tagClusterPrefix    = "kubernetes.io/cluster/"
	tagCNIClusterPrefix = "cni.networking.k8s.aws/cluster/"
)

// subnetRefreshEvery is how old the cached candidate list may grow before the next plan reads it again;
// subnetRetryAfter is how soon a failed read is tried again.
const (
	subnetRefreshEvery = 5 * time.Minute
	subnetRetryAfter   = time.Minute
)

// ErrNoSubnet: no candidate subnet has room for a new ENI (all are full, excluded or refused one lately).
var ErrNoSubnet = errors.New("no subnet with free addresses")

// subnetCandidates caches the subnets new ENIs may go to. Who may touch it: any goroutine (the plans of one
// round run side by side), under mu.
type subnetCandidates struct {
	ec2 ec2client.EC2API
	// cache is the node's record of the subnets read, which every refresh adds to.
	cache   *cache
	enabled bool
	vpcID   string
	az      string
	cluster string
	// node is the node's own subnet: the only candidate when discovery is off or nothing else is known.
	node  subnetInfo
	clock clock.Clock
	log   *slog.Logger

	mu      sync.Mutex
	list    []subnetInfo // candidates, most free addresses first
	fetched time.Time
	stale   bool
	failing bool // the last refresh failed; logged once per streak
	// refused are the subnets that refused a create for want of addresses, and when: skipped until a refresh
	// after subnetRefreshEvery shows them again.
	refused map[string]time.Time
}

func newSubnetCandidates(api ec2client.EC2API, c *cache, cfg Config, clk clock.Clock, log *slog.Logger) *subnetCandidates {
	node := subnetInfo{ID: cfg.SubnetID, CIDR: cfg.SubnetCIDR, AZ: cfg.AZ}
	if node.ID != "" && node.CIDR != "" {
		c.put(node)
	}
	return &subnetCandidates{ec2: api, cache: c, enabled: cfg.Discovery && cfg.VPCID != "", vpcID: cfg.VPCID, az: cfg.AZ,
		cluster: cfg.Cluster, node: node, clock: clk, log: log, list: []subnetInfo{node}, refused: map[string]time.Time{}}
}

// next returns the subnet for a new ENI that needs want addresses: the candidate with the most free ones
// that has not refused lately. It returns ErrNoSubnet when none is left.
func (s *subnetCandidates) next(ctx context.Context, want int) (subnetInfo, error) {
	s.refresh(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.list {
		if s.refusedLocked(c.ID) || !s.enabled && c.ID != s.node.ID {
			continue
		}
		// A subnet's count lags; a discovered one with too few left is passed over, the node's own never is
		// (EC2 has the last word there, as it had before discovery).
		if c.ID != s.node.ID && c.Free < want+1 {
			continue
		}
		return c, nil
	}
	return subnetInfo{}, fmt.Errorf("placing a new ENI: %w (candidates: %s)", ErrNoSubnet, s.namesLocked())
}

// refusedCreate notes that subnetID refused a create for want of addresses: the next plan reads the list again
// and goes to the next candidate. With discovery off there is no other: the pool backs off as before.
func (s *subnetCandidates) refusedCreate(subnetID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.enabled {
		return
	}
	if !s.refusedLocked(subnetID) {
		s.log.Warn("subnet refused a new ENI for want of addresses; the next ENI goes to the next candidate",
			"subnet", subnetID)
	}
	s.refused[subnetID] = s.clock.Now()
	s.stale = true
}

// remaining reports whether a candidate that has not refused lately is left: a refusal then moves on to it
// instead of backing the pool off.
func (s *subnetCandidates) remaining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.list {
		if !s.refusedLocked(c.ID) && (s.enabled || c.ID == s.node.ID) {
			return true
		}
	}
	return false
}

// isRefused reports whether subnetID refused a create lately.
func (s *subnetCandidates) isRefused(subnetID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusedLocked(subnetID)
}

// refusedLocked reports whether subnetID refused a create less than subnetRefreshEvery ago (s.mu held).
func (s *subnetCandidates) refusedLocked(subnetID string) bool {
	at, ok := s.refused[subnetID]
	return ok && s.clock.Since(at) < subnetRefreshEvery
}

// refresh reads the candidates again when the list is older than subnetRefreshEvery or a refusal made it
// stale; it does nothing with discovery off. A failed read keeps the last list until the next refusal or
// subnetRetryAfter, so a denied or throttled DescribeSubnets costs no call per plan.
func (s *subnetCandidates) refresh(ctx context.Context) {
	s.mu.Lock()
	now := s.clock.Now()
	due := s.enabled && (s.stale || s.fetched.IsZero() || now.Sub(s.fetched) >= subnetRefreshEvery)
	if due {
		s.stale = false // one refresh answers every plan of this round
		s.fetched = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	subnets, err := describeSubnets(ctx, s.ec2, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{s.vpcID}},
		{Name: aws.String("availability-zone"), Values: []string{s.az}},
	}})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if !s.failing {
			s.log.Warn("reading candidate subnets; using the last list", "error", err)
		}
		s.failing = true
		s.fetched = now.Add(subnetRetryAfter - subnetRefreshEvery) // read again in subnetRetryAfter
		return
	}
	s.failing = false
	var list, all []subnetInfo
	for _, sn := range subnets {
		info := subnetFrom(sn)
		all = append(all, info)
		if s.candidate(sn) {
			list = append(list, info)
		}
	}
	s.cache.put(all...)
	slices.SortStableFunc(list, func(a, b subnetInfo) int {
		return cmp.Or(cmp.Compare(b.Free, a.Free), cmp.Compare(a.ID, b.ID))
	})
	for id, at := range s.refused {
		if now.Sub(at) >= subnetRefreshEvery {
			delete(s.refused, id)
		}
	}
	if names(list) != names(s.list) {
		s.log.Info("candidate subnets for new ENIs", "subnets", names(list))
	}
	s.list = list
}

// candidate applies the tags: the node's own subnet is in unless tagged role/cni=0; another needs
// role/cni=1; a subnet tagged for clusters is for those clusters only.
func (s *subnetCandidates) candidate(sn types.Subnet) bool {
	role, hasRole := "", false
	var clusters []string
	for _, t := range sn.Tags {
		k := aws.ToString(t.Key)
		switch {
		case k == TagCNIRole:
			role, hasRole = strings.TrimSpace(aws.ToString(t.Value)), true
		case strings.HasPrefix(k, tagClusterPrefix):
			clusters = append(clusters, strings.TrimPrefix(k, tagClusterPrefix))
		case strings.HasPrefix(k, tagCNIClusterPrefix):
			clusters = append(clusters, strings.TrimPrefix(k, tagCNIClusterPrefix))
		}
	}
	if hasRole && role == "0" {
		return false
	}
	if aws.ToString(sn.SubnetId) != s.node.ID && role != "1" {
		return false
	}
	return len(clusters) == 0 || slices.Contains(clusters, s.cluster)
}

// status lists the candidates for `eniwirectl status`, in the order new ENIs take them.
func (s *subnetCandidates) status() []api.SubnetStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []api.SubnetStatus{}
	for _, c := range s.list {
		if !s.enabled && c.ID != s.node.ID {
			continue
		}
		out = append(out, api.SubnetStatus{ID: c.ID, CIDR: c.CIDR, Free: c.Free, Refused: s.refusedLocked(c.ID)})
	}
	return out
}

func (s *subnetCandidates) namesLocked() string { return names(s.list) }

func names(list []subnetInfo) string {
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	return strings.Join(ids, ",")
}
