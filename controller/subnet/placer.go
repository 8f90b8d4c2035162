// Package subnet decides where a node's new ENIs go and which ENIs pods may no longer take addresses from:
// the subnets discovery finds (candidates.go), the ENIConfig of custom networking (eniconfig.go), the one cache
// of the subnets read from EC2, by id (cache.go), and the gateway of a subnet (gateway.go). The node controller
// asks its Placer; the Placer reads the books through the small Books interface and EC2 through
// ec2client.EC2API.
package subnet

// Where new ENIs go, and which ENIs pods may no longer take addresses from. Without custom networking a new
// ENI goes to the best discovered subnet (candidates.go) with the primary ENI's security groups. With custom
// networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG) it goes to the subnet of the node's ENIConfig, with the
// ENIConfig's groups, and the primary ENI carries no pods: its addresses are the node's, in the node's
// subnet, which is the point of custom networking. When the ENIConfig names another subnet, ENIs of the old
// one are retired: pods keep their addresses, no new pod gets one there, and once empty the pool's usual
// surplus path releases them.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/internal/clock"
)

// ErrNoPlacement: no new ENI may be made now: no ENIConfig applies, its subnet is in another zone or cannot
// be read, or no discovered subnet has room. The error says which; the pool backs off and retries.
var ErrNoPlacement = errors.New("no subnet for a new ENI")

// Books is what placement needs of the node's books: to read the ENIs, and to record the subnet CIDR of
// adopted ENIs (LearnSubnets).
type Books interface {
	// View runs fn on the state under the books' lock; fn must not keep or change it.
	View(fn func(st *journal.State))
	// Update applies fn to the state and journals the result before it returns.
	Update(ctx context.Context, fn func(st *journal.State) error) error
}

// Config is what placement knows of the node and its settings.
type Config struct {
	// Discovery is ENABLE_SUBNET_DISCOVERY: new ENIs may go to the zone's subnets tagged for pods.
	Discovery bool
	// VPCID and AZ are the node's VPC and zone; discovery needs the VPC id and is off without it.
	VPCID string
	AZ    string
	// SubnetID and SubnetCIDR are the node's own subnet.
	SubnetID   string
	SubnetCIDR string
	// Cluster is the cluster's name: a subnet tagged for other clusters only is not a candidate.
	Cluster string
}

// Deps are the Placer's dependencies.
type Deps struct {
	EC2 ec2client.EC2API
	// ENIConfigs is the ENIConfig source; nil when custom networking is off.
	ENIConfigs ENIConfigSource
	Books      Books
	Clock      clock.Clock
	Log        *slog.Logger
}

// Placer decides where new ENIs go. Who may touch it: any goroutine, under mu (the Run loop observes, the
// plans of a round place side by side, the API's Assign asks retired).
type Placer struct {
	subnets *subnetCandidates
	// cache is the subnets read so far, by id (discovery's, the ENIConfigs', adopted ENIs'): each read once,
	// not per plan.
	cache *cache
	books Books
	// custom is the ENIConfig source; nil when custom networking is off.
	custom ENIConfigSource
	az     string
	log    *slog.Logger

	mu sync.Mutex
	// inForce is the ENIConfig new ENIs go by, once its subnet was read and found in the node's zone; the
	// zero value while none has been.
	inForce ENIConfig
	// blocked says why no new ENI may be made now ("" when one may).
	blocked string
	// apiErr is the source's connection error, for the status line.
	apiErr string
	// retired are the ENIs pods may no longer take addresses from, by id.
	retired map[string]bool
}

// NewPlacer returns the Placer of a node.
func NewPlacer(cfg Config, deps Deps) *Placer {
	c := newCache(deps.EC2, deps.Clock, deps.Log)
	return &Placer{subnets: newSubnetCandidates(deps.EC2, c, cfg, deps.Clock, deps.Log), cache: c, books: deps.Books,
		custom: deps.ENIConfigs, az: cfg.AZ, log: deps.Log, retired: map[string]bool{}}
}

// CustomNetworking reports whether new ENIs follow an ENIConfig.
func (p *Placer) CustomNetworking() bool { return p.custom != nil }

// Observe reads the ENIConfig in force and marks the ENIs of the books that pods may no longer use. It costs
// one DescribeSubnets the first time an ENIConfig names a subnet the node has not read, nothing otherwise. The
// Run loop calls it every round, so a changed ENIConfig takes effect within a pool interval.
func (p *Placer) Observe(ctx context.Context) {
	if p.custom == nil {
		return
	}
	c, ok, why := p.custom.Current()
	var blocked, apiErr string
	if err := p.custom.Err(); err != nil {
		apiErr = fmt.Sprintf("the API server is unreachable (%v); going by the last ENIConfig seen", err)
	}
	switch {
	case !ok:
		blocked = fmt.Sprintf("no ENIConfig applies to the node (%s): no new ENI", why)
	default:
		sn, err := p.cache.read(ctx, c.Subnet)
		switch {
		case err != nil:
			blocked = fmt.Sprintf("reading subnet %s of ENIConfig %s: %v: no new ENI", c.Subnet, c.Name, err)
		case sn.AZ != p.az:
			blocked = fmt.Sprintf("ENIConfig %s names subnet %s in zone %s, not the node's zone %s: no new ENI",
				c.Name, c.Subnet, sn.AZ, p.az)
		}
	}
	p.mu.Lock()
	if blocked != p.blocked && blocked != "" {
		p.log.Error("custom networking", "error", blocked)
	}
	if blocked == "" && (c.Name != p.inForce.Name || c.Subnet != p.inForce.Subnet || !slices.Equal(c.SecurityGroups, p.inForce.SecurityGroups)) {
		p.log.Info("custom networking: new ENIs follow ENIConfig", "eniconfig", c.Name, "subnet", c.Subnet,
			"securityGroups", c.SecurityGroups, "was", p.inForce.Subnet)
		p.inForce = c
	}
	if apiErr != "" && p.apiErr == "" {
		p.log.Warn("custom networking: " + apiErr)
	}
	p.blocked, p.apiErr = blocked, apiErr
	target := p.inForce.Subnet
	p.mu.Unlock()

	retired := map[string]bool{}
	p.books.View(func(st *journal.State) {
		for _, e := range st.ENIs {
			if e.ID != "" && (e.Primary || target != "" && e.SubnetID != target) {
				retired[e.ID] = true
			}
		}
	})
	p.mu.Lock()
	p.retired = retired
	p.mu.Unlock()
}

// Place returns where a new ENI that needs want addresses goes, or an error wrapping ErrNoPlacement.
func (p *Placer) Place(ctx context.Context, want int) (eni.Placement, error) {
	if p.custom == nil {
		sn, err := p.subnets.next(ctx, want)
		if err != nil {
			return eni.Placement{}, fmt.Errorf("%w: %w", ErrNoPlacement, err)
		}
		return eni.Placement{SubnetID: sn.ID, SubnetCIDR: sn.CIDR}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked != "" {
		return eni.Placement{}, fmt.Errorf("%w: custom networking: %s", ErrNoPlacement, p.blocked)
	}
	c := p.inForce
	return eni.Placement{SubnetID: c.Subnet, SubnetCIDR: p.CIDROf(c.Subnet),
		SecurityGroups: slices.Clone(c.SecurityGroups)}, nil
}

// SubnetFull notes that subnetID refused a new ENI for want of addresses, and reports whether the next one
// can go elsewhere (discovery has another candidate) instead of the pool backing off. When the cached list
// has no other, it is read again first: it may be the node's own subnet alone because the first read failed
// (a rollout's nodes all read at once and EC2 throttles some), and backing off on it stalled such nodes for
// minutes while pod subnets had room.
func (p *Placer) SubnetFull(ctx context.Context, subnetID string) bool {
	if p.custom != nil || !p.subnets.enabled {
		return false
	}
	p.subnets.refusedCreate(subnetID)
	if p.subnets.remaining() {
		return true
	}
	p.subnets.refresh(ctx)
	return p.subnets.remaining()
}

// PassedOver reports whether discovery passes subnetID over for new ENIs now (it refused one lately) and
// has another candidate: a plan for it that was never sent goes elsewhere.
func (p *Placer) PassedOver(subnetID string) bool {
	if p.custom != nil || !p.subnets.enabled {
		return false
	}
	return p.subnets.isRefused(subnetID) && p.subnets.remaining()
}

// Candidates lists the subnets discovery offers for `eniwirectl status`, in the order new ENIs take them; nil
// with custom networking, where the ENIConfig names the subnet.
func (p *Placer) Candidates() []api.SubnetStatus {
	if p.custom != nil {
		return nil
	}
	return p.subnets.status()
}

// CIDROf returns the CIDR of a subnet read from EC2 so far (or the node's own), or "". No I/O.
func (p *Placer) CIDROf(subnetID string) string {
	sn, _ := p.cache.get(subnetID)
	return sn.CIDR
}

// IsRetired reports whether pods may no longer take addresses of the ENI.
func (p *Placer) IsRetired(eniID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.retired[eniID]
}

// Retired returns a copy of the retired ENIs.
func (p *Placer) Retired() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.retired)
}

// CustomNetworkingStatus is the custom-networking line of `eniwirectl status`, "" when it is off: the ENIConfig in force,
// the ENIs of other subnets that drain, and what stops new ENIs.
func (p *Placer) CustomNetworkingStatus(st *journal.State, assigned func(eniID string) int) string {
	if p.custom == nil {
		return ""
	}
	p.mu.Lock()
	c, blocked, apiErr := p.inForce, p.blocked, p.apiErr
	p.mu.Unlock()
	var parts []string
	if c.Name != "" {
		parts = append(parts, fmt.Sprintf("ENIConfig %s subnet %s", c.Name, c.Subnet))
	}
	type drain struct{ enis, pods int }
	draining := map[string]*drain{}
	for _, e := range st.ENIs {
		if e.Primary || e.ID == "" || c.Subnet == "" || e.SubnetID == c.Subnet {
			continue
		}
		d := draining[e.SubnetID]
		if d == nil {
			d = &drain{}
			draining[e.SubnetID] = d
		}
		d.enis++
		d.pods += assigned(e.ID)
	}
	for _, sn := range slices.Sorted(maps.Keys(draining)) {
		d := draining[sn]
		enis := fmt.Sprintf("%d ENIs in %s drain", d.enis, sn)
		if d.enis == 1 {
			enis = fmt.Sprintf("1 ENI in %s drains", sn)
		}
		parts = append(parts, fmt.Sprintf("%s (%d pods)", enis, d.pods))
	}
	if blocked != "" {
		parts = append(parts, blocked)
	}
	if apiErr != "" {
		parts = append(parts, apiErr)
	}
	return "custom networking: " + strings.Join(parts, "; ")
}
