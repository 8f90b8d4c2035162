package hostroute

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// The agent removes a released pod's host veth itself, off the CNI DEL's critical path: deleting a veth makes
// the kernel wait for an RCU barrier (tens of milliseconds with lazy RCU), which would otherwise be most of
// DEL's latency. A Reaper is that removal: PodDown hands it the released veth (Release) and one goroutine
// deletes veths one by one (Run). What it has not removed when the agent stops, it finds again after the
// restart without any record of its own: every host veth carrying the prefix that no live pod claims (PodUp
// calls Keep, also when the agent replays its books at start) is removed once it has stayed unclaimed for a
// grace period. The grace covers the moment between the plugin creating a veth and the agent's PodUp for it,
// and the replay of the books after a restart.

// Defaults of ReaperConfig.
const (
	DefaultVethPrefix    = "eniw"
	DefaultSweepGrace    = 2 * time.Minute
	DefaultSweepInterval = 30 * time.Second
	DefaultReapQueue     = 1024
)

// ErrVethRemoving is returned (wrapped) by Keep when the veth's removal has already started: the veth, and its
// pod end, are going away, so the ADD that wants to keep them must be retried (it then makes a new pair).
var ErrVethRemoving = fmt.Errorf("host veth is being removed (%w)", dptypes.ErrHostVethGone)

// Veth is a host veth as the agent recorded it. Index and MAC tell it apart from a later veth of the same
// name (a newer sandbox of the same pod), which must survive.
type Veth struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
}

// ReaperConfig shapes a Reaper; zero values take the defaults.
type ReaperConfig struct {
	// Prefix names the veths the sweep considers (the CNI plugin's host veth prefix).
	Prefix string
	// Grace is how long a veth must stay unclaimed before the sweep removes it.
	Grace time.Duration
	// SweepInterval is how often Run sweeps.
	SweepInterval time.Duration
	// Queue bounds the releases waiting for removal; beyond it a release is left to the sweep.
	Queue int
	// Handle is the netlink handle to use (nil: the current network namespace, a socket per request). A
	// handle opened with NewHandleAt serves one request at a time: share it with nothing that must not wait
	// behind a deletion.
	Handle *netlink.Handle
	Logger *slog.Logger
	// Removed, if set, is called from Run's goroutine once a released or swept veth is gone (deleted here or
	// already missing), with its index: the BPF datapath unpins that index's program link there.
	Removed func(ifindex int)
}

// Reaper removes released host veths in the background and sweeps unclaimed ones. Its methods are safe for
// concurrent use; Run must be running for releases to be acted on.
type Reaper struct {
	cfg   ReaperConfig
	log   *slog.Logger
	queue chan Veth

	mu       sync.Mutex
	kept     map[string]int    // name -> index of a veth a live pod uses
	removing map[int]bool      // index -> its deletion has started
	unseen   map[int]time.Time // index -> when the sweep first found it unclaimed
}

// NewReaper returns a Reaper; start it with Run.
func NewReaper(cfg ReaperConfig) *Reaper {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultVethPrefix
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultSweepGrace
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultReapQueue
	}
	if cfg.Handle == nil {
		cfg.Handle = &netlink.Handle{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reaper{cfg: cfg, log: log, queue: make(chan Veth, cfg.Queue), kept: map[string]int{},
		removing: map[int]bool{}, unseen: map[int]time.Time{}}
}

// Keep marks a veth as a live pod's: neither a pending release nor the sweep removes it. A release of the
// same veth that is still queued is thereby cancelled (a repeated ADD reused the pair). It fails with
// ErrVethRemoving when the deletion has already started.
func (r *Reaper) Keep(v Veth) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removing[v.Index] {
		return fmt.Errorf("keeping host veth %s (index %d): %w", v.Name, v.Index, ErrVethRemoving)
	}
	r.kept[v.Name] = v.Index
	delete(r.unseen, v.Index)
	return nil
}

// Release queues a released pod's veth for removal and returns at once, without a netlink request. v.Index is
// the index the agent recorded (0: whatever holds the name when the removal comes); the removal deletes the
// link at that index only while it still carries v.Name (and v.MAC, if given), so a newer veth of the same
// name survives.
func (r *Reaper) Release(v Veth) {
	if v.Name == "" && v.Index == 0 {
		return
	}
	r.mu.Lock()
	if idx, ok := r.kept[v.Name]; ok && (v.Index == 0 || idx == v.Index) {
		delete(r.kept, v.Name)
	}
	r.mu.Unlock()
	r.enqueue(v)
}

func (r *Reaper) enqueue(v Veth) {
	select {
	case r.queue <- v:
	default:
		r.log.Warn("host veth removal queue full; the sweep will remove it", "veth", v.Name, "ifindex", v.Index,
			"grace", r.cfg.Grace)
	}
}

// find returns the link v names (by index when it has one, checking the name), nil when there is none.
func (r *Reaper) find(v Veth) (netlink.Link, error) {
	var (
		l   netlink.Link
		err error
	)
	if v.Index != 0 {
		l, err = r.cfg.Handle.LinkByIndex(v.Index)
	} else {
		l, err = netlinkdump.LinkByName(r.cfg.Handle, v.Name)
	}
	if isLinkNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up host veth %s (index %d): %w", v.Name, v.Index, err)
	}
	if l.Type() != "veth" || (v.Name != "" && l.Attrs().Name != v.Name) ||
		(v.MAC != nil && l.Attrs().HardwareAddr.String() != v.MAC.String()) {
		return nil, nil
	}
	return l, nil
}

// Run removes released veths as they come and sweeps every SweepInterval, until ctx ends. It returns nil.
func (r *Reaper) Run(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case v := <-r.queue:
			if _, err := r.remove(v); err != nil {
				r.log.Warn("removing host veth", "veth", v.Name, "ifindex", v.Index, "error", err)
			}
		case <-tick.C:
			if _, err := r.Sweep(ctx); err != nil {
				r.log.Warn("sweeping host veths", "error", err)
			}
		}
	}
}

// remove deletes v unless a live pod claims it or its index now holds another link. removed says whether
// it deleted something.
func (r *Reaper) remove(v Veth) (removed bool, err error) {
	if v.Index == 0 {
		l, err := r.find(v)
		if err != nil || l == nil {
			return false, err
		}
		v.Index, v.MAC = l.Attrs().Index, l.Attrs().HardwareAddr
	}
	r.mu.Lock()
	if idx, ok := r.kept[v.Name]; ok && idx == v.Index {
		r.mu.Unlock()
		return false, nil
	}
	r.removing[v.Index] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.removing, v.Index)
		delete(r.unseen, v.Index)
		r.mu.Unlock()
	}()

	l, err := r.find(Veth{Name: v.Name, Index: v.Index, MAC: v.MAC})
	if err != nil {
		return false, err
	}
	if l == nil {
		if other, _ := r.cfg.Handle.LinkByIndex(v.Index); other == nil && r.cfg.Removed != nil {
			r.cfg.Removed(v.Index)
		}
		return false, nil
	}
	// The deletion itself is the slow part: no lock is held across it, so Keep and Release stay quick.
	if err := r.cfg.Handle.LinkDel(l); err != nil && !isLinkNotFound(err) {
		return false, fmt.Errorf("deleting host veth %s (index %d): %w", v.Name, v.Index, err)
	}
	if r.cfg.Removed != nil {
		r.cfg.Removed(v.Index)
	}
	r.log.Debug("host veth removed", "veth", v.Name, "ifindex", v.Index)
	return true, nil
}

// Sweep removes every veth with the prefix that no live pod has claimed for at least Grace, and returns how
// many it removed. The first sweep that finds a veth unclaimed starts its grace.
func (r *Reaper) Sweep(ctx context.Context) (int, error) {
	links, err := netlinkdump.Links(r.cfg.Handle)
	if err != nil {
		return 0, fmt.Errorf("listing links: %w", err)
	}
	now := time.Now()
	var stale []Veth
	present := map[int]bool{}
	r.mu.Lock()
	for _, l := range links {
		a := l.Attrs()
		if l.Type() != "veth" || !strings.HasPrefix(a.Name, r.cfg.Prefix) {
			continue
		}
		present[a.Index] = true
		if idx, ok := r.kept[a.Name]; (ok && idx == a.Index) || r.removing[a.Index] {
			delete(r.unseen, a.Index)
			continue
		}
		first, ok := r.unseen[a.Index]
		if !ok {
			first = now
			r.unseen[a.Index] = now
		}
		if now.Sub(first) >= r.cfg.Grace {
			stale = append(stale, Veth{Name: a.Name, Index: a.Index, MAC: a.HardwareAddr})
		}
	}
	for idx := range r.unseen {
		if !present[idx] {
			delete(r.unseen, idx)
		}
	}
	r.mu.Unlock()

	n := 0
	var errs []error
	for _, v := range stale {
		if ctx.Err() != nil {
			break
		}
		removed, err := r.remove(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if removed {
			n++
			r.log.Info("swept unclaimed host veth", "veth", v.Name, "ifindex", v.Index, "grace", r.cfg.Grace)
		}
	}
	return n, errors.Join(errs...)
}

func isLinkNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, syscall.ENODEV)
}
