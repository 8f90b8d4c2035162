// Package ec2sim is an in-memory stand-in for the parts of Amazon EC2 and the instance metadata service
// (IMDS) that eniwire uses: subnets, instances, network interfaces with attachments and private IPs, tags,
// AWS's request throttling and injectable faults. It is served over HTTP as the EC2 Query API and as IMDS,
// so the real aws-sdk-go-v2 clients (and the AWS CLI) are its clients.
package ec2sim

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/eniwire/eniwire/internal/clock"
)

// BucketSpec is one token bucket of EC2's request throttling: Capacity tokens, refilled at RefillPerSec.
type BucketSpec struct {
	Capacity     float64 `json:"capacity"`
	RefillPerSec float64 `json:"refillPerSec"`
}

// Config shapes a simulator. Durations are virtual time of Clock.
type Config struct {
	Region, AccountID string
	// Clock is the time of everything that waits: bucket refill, attachment delays, lags. A *clock.Scaled
	// speeds all of them up together.
	Clock clock.Clock
	// Throttling turns AWS's token buckets on.
	Throttling bool
	// Buckets overrides bucket sizes, keyed by action name, or by "<Action>/unfiltered" for the smaller
	// bucket of unfiltered, unpaginated describes.
	Buckets map[string]BucketSpec
	// IDListIsFilter makes DescribeNetworkInterfaces/DescribeInstances with an ID list count as filtered
	// (the AWS documentation does not say); DefaultConfig sets it.
	IDListIsFilter bool
	// AttachDelay is how long an attachment stays "attaching", DetachDelay how long "detaching".
	AttachDelay, DetachDelay time.Duration
	// ScatterAddresses hands each subnet's addresses out across the whole subnet, as EC2 does, instead of
	// in order (SubnetSpec.Scatter does it for one subnet). Single IPs then fragment the subnet, so that
	// counted /28 prefixes can fail with InsufficientCidrBlocks while addresses remain. Seed makes the
	// order reproducible.
	ScatterAddresses bool
	// SecurityGroupsPerENI is how many security groups one ENI may carry: EC2's quota, 5 unless raised (to
	// at most 16); 0 means 5.
	SecurityGroupsPerENI int
	// Seed makes ids, MACs and random faults reproducible.
	Seed int64
	// Logger receives one line per state change; nil discards.
	Logger *slog.Logger
}

// DefaultConfig is us-west-2, account 111122223333, real time, throttling on, instant attachments.
func DefaultConfig() Config {
	return Config{
		Region:         "us-west-2",
		AccountID:      "111122223333",
		Clock:          clock.Real{},
		Throttling:     true,
		IDListIsFilter: true,
		Seed:           1,
	}
}

// Sentinel errors of the Go API (the HTTP API answers EC2 error codes instead).
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrInvalid  = errors.New("invalid value")
)

// Sim is one account in one region. All state sits behind one mutex; every operation is O(size of what
// it touches), never O(all ENIs) on the hot paths of attach, assign and IMDS.
type Sim struct {
	cfg    Config
	clk    clock.Clock
	log    *slog.Logger
	faults *Faults

	mu          sync.Mutex
	rng         *rand.Rand
	vpcs        map[string]*vpc
	groups      map[string]*secGroup
	ruleOwner   map[string]*secGroup // security group rule id -> its group
	ruleSeq     uint64
	subnets     map[string]*subnet
	instances   map[string]*instance
	enis        map[string]*eni
	attachments map[string]*eni
	macs        map[string]bool
	ipOwner     map[netip.Addr]*eni
	tokens      map[string]*tokenEntry
	pending     map[*eni]struct{}
	buckets     map[string]*bucket
	counters    map[string]*ActionCounters
	subs        map[int]*subscriber
	nextSub     int
	reqSeq      uint64
	// imdsURL lets the admin API answer where a new instance's IMDS listens (set by Start).
	imdsURL func(instanceID string) string
	// onInstance is called (outside the lock) after AddInstance, so a Server can open its IMDS listener.
	onInstance []func(Instance)
}

type vpc struct {
	ID string
	// CIDR is the primary IPv4 block; Blocks are all the associated ones, the primary first.
	CIDR   netip.Prefix
	Blocks []cidrBlock
	// IPv6Blocks are the VPC's IPv6 /56s (ipv6.go).
	IPv6Blocks []ipv6Block
	SG         string
	Tags       map[string]string
}

type instance struct {
	ID, Type, AZ, SubnetID, VPCID string
	SGs                           []string
	State                         string
	Launched                      time.Time
	Primary                       *eni
	Tags                          map[string]string
	Metadata                      metadataOptions
	attached                      map[string]*eni
}

type eni struct {
	ID, SubnetID, VPCID, AZ, MAC, Description string
	Groups                                    []string
	SourceDestCheck                           bool
	IPs                                       []stamped[netip.Addr]
	Prefixes                                  []stamped[netip.Prefix]
	// IPv6s and IPv6Prefixes are the ENI's IPv6 addresses and /80s, out of its subnet's /64.
	IPv6s        []stamped[netip.Addr]
	IPv6Prefixes []stamped[netip.Prefix]
	// Unassigned are secondary IPs unassigned from the ENI, with when: Describe lists them for the unassign lag.
	Unassigned         []stamped[netip.Addr]
	Tags               map[string]string
	Created, VisibleAt time.Time
	Att                *attachment
}

type stamped[T any] struct {
	V     T
	Since time.Time
}

type attachment struct {
	ID, InstanceID       string
	DeviceIndex, CardIdx int
	Status               string
	AttachTime, Deadline time.Time
	AttachedAt           time.Time
	DeleteOnTermination  bool
}

type tokenEntry struct {
	hash string
	resp *createENIResponse
}

// New returns an empty simulator: add VPCs, subnets and instances, then serve it.
func New(cfg Config) *Sim {
	def := DefaultConfig()
	if cfg.Region == "" {
		cfg.Region = def.Region
	}
	if cfg.AccountID == "" {
		cfg.AccountID = def.AccountID
	}
	if cfg.Clock == nil {
		cfg.Clock = def.Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sim{
		cfg:         cfg,
		clk:         cfg.Clock,
		log:         cfg.Logger,
		rng:         rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed)),
		vpcs:        map[string]*vpc{},
		groups:      map[string]*secGroup{},
		ruleOwner:   map[string]*secGroup{},
		subnets:     map[string]*subnet{},
		instances:   map[string]*instance{},
		enis:        map[string]*eni{},
		attachments: map[string]*eni{},
		macs:        map[string]bool{},
		ipOwner:     map[netip.Addr]*eni{},
		tokens:      map[string]*tokenEntry{},
		pending:     map[*eni]struct{}{},
		buckets:     map[string]*bucket{},
		counters:    map[string]*ActionCounters{},
		subs:        map[int]*subscriber{},
	}
	s.faults = newFaults(cfg.Seed)
	return s
}

// Config returns the configuration the simulator runs with.
func (s *Sim) Config() Config { return s.cfg }

// Clock is the simulator's time source.
func (s *Sim) Clock() clock.Clock { return s.clk }

// SetThrottling switches AWS's buckets on or off at run time.
func (s *Sim) SetThrottling(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Throttling = on
	s.buckets = map[string]*bucket{}
}

// SetBucket overrides one bucket (key as Config.Buckets) at run time; the bucket starts full.
func (s *Sim) SetBucket(key string, b BucketSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Buckets == nil {
		s.cfg.Buckets = map[string]BucketSpec{}
	} else {
		cp := make(map[string]BucketSpec, len(s.cfg.Buckets)+1)
		for k, v := range s.cfg.Buckets {
			cp[k] = v
		}
		s.cfg.Buckets = cp
	}
	s.cfg.Buckets[key] = b
	for k := range s.buckets {
		delete(s.buckets, k)
	}
}

// SetDelays changes the attaching and detaching durations for attachments started from now on.
func (s *Sim) SetDelays(attach, detach time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.AttachDelay, s.cfg.DetachDelay = attach, detach
}

// newID returns a fresh prefixed id with 17 hex digits, like EC2's.
func (s *Sim) newID(prefix string, taken func(string) bool) string {
	for {
		id := fmt.Sprintf("%s-0%016x", prefix, s.rng.Uint64())
		if !taken(id) {
			return id
		}
	}
}

func (s *Sim) newMAC() string {
	for {
		v := s.rng.Uint64()
		mac := fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		if !s.macs[mac] {
			s.macs[mac] = true
			return mac
		}
	}
}

// AddVPC adds a VPC with its primary CIDR (and a default security group that admits all traffic).
func (s *Sim) AddVPC(id, cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return fmt.Errorf("adding VPC %s: CIDR %q: %w", id, cidr, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		id = s.newID("vpc", func(x string) bool { return s.vpcs[x] != nil })
	}
	if s.vpcs[id] != nil {
		return fmt.Errorf("adding VPC %s: %w", id, ErrExists)
	}
	v := &vpc{ID: id, CIDR: p.Masked(), Tags: map[string]string{}}
	v.Blocks = []cidrBlock{{AssociationID: associationID(id, v.CIDR), CIDR: v.CIDR}}
	v.SG = s.newID("sg", func(x string) bool { return s.groups[x] != nil })
	// EC2's default group admits only its own members; this one admits everything, as the simulator's
	// VPCs always have, so that worlds that never name a group pass all traffic.
	sg := &secGroup{ID: v.SG, VPCID: id, Name: "default", Description: "default VPC security group", Tags: map[string]string{}}
	if err := s.addGroupLocked(sg, allowAll()); err != nil {
		return fmt.Errorf("adding VPC %s: its default security group: %s: %w", id, err.Message, ErrInvalid)
	}
	s.vpcs[id] = v
	s.log.Info("vpc added", "vpc", id, "cidr", v.CIDR)
	return nil
}

// SubnetSpec describes a subnet to add.
type SubnetSpec struct {
	ID    string `json:"id"`
	VPCID string `json:"vpcId"`
	CIDR  string `json:"cidr"`
	AZ    string `json:"az"`
	// Scatter hands this subnet's addresses out across it (Config.ScatterAddresses does it for all).
	Scatter bool `json:"scatter,omitempty"`
	// Tags are the subnet's tags (e.g. kubernetes.io/role/cni = 1).
	Tags map[string]string `json:"tags,omitempty"`
	// IPv6CIDR is the subnet's IPv6 /64, out of an IPv6 block of its VPC; empty for an IPv4-only subnet.
	IPv6CIDR string `json:"ipv6Cidr,omitempty"`
}

// AddSubnet adds a subnet inside one of the CIDR blocks of an existing VPC.
func (s *Sim) AddSubnet(spec SubnetSpec) error {
	p, err := netip.ParsePrefix(spec.CIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() > 28 || p.Bits() < 16 {
		return fmt.Errorf("adding subnet %s: CIDR %q (an IPv4 /16 to /28): %w", spec.ID, spec.CIDR, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vpcs[spec.VPCID]
	if v == nil {
		return fmt.Errorf("adding subnet %s: VPC %s: %w", spec.ID, spec.VPCID, ErrNotFound)
	}
	p = p.Masked()
	if v.blockOf(p) == nil {
		return fmt.Errorf("adding subnet %s: %s is not inside a CIDR block of VPC %s (%s): %w", spec.ID, p, v.ID,
			v.blockList(), ErrInvalid)
	}
	for _, o := range s.subnets {
		if o.VPCID == v.ID && o.CIDR.Overlaps(p) {
			return fmt.Errorf("adding subnet %s: %s overlaps %s: %w", spec.ID, p, o.ID, ErrExists)
		}
	}
	if spec.ID == "" {
		spec.ID = s.newID("subnet", func(x string) bool { return s.subnets[x] != nil })
	}
	if s.subnets[spec.ID] != nil {
		return fmt.Errorf("adding subnet %s: %w", spec.ID, ErrExists)
	}
	if spec.AZ == "" {
		spec.AZ = s.cfg.Region + "a"
	}
	var v6 *subnetIPv6
	if spec.IPv6CIDR != "" {
		var aerr *APIError
		if v6, aerr = s.subnetIPv6Locked(spec.ID, v.ID, spec.IPv6CIDR); aerr != nil {
			return fmt.Errorf("adding subnet %s: %s: %w", spec.ID, aerr.Message, ErrInvalid)
		}
	}
	sn := newSubnet(spec.ID, v.ID, spec.AZ, p)
	sn.IPv6 = v6
	for k, val := range spec.Tags {
		sn.Tags[k] = val
	}
	if s.cfg.ScatterAddresses || spec.Scatter {
		sn.scatter = rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
	}
	s.subnets[spec.ID] = sn
	s.log.Info("subnet added", "subnet", spec.ID, "vpc", v.ID, "cidr", p, "az", spec.AZ)
	return nil
}
