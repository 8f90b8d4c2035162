// Package eni is the ENI commit: the state machine that creates, attaches, marks DeleteOnTermination on and
// releases secondary ENIs, journaling each state before the EC2 call that leaves it, and the reconciler that
// compares the journal with EC2 and IMDS. The pool manager drives it one step at a time.
package eni

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/internal/clock"
)

// Tag keys every ENI we create carries from birth (TagSpecifications). The reconciler adopts and the GC
// deletes only ENIs with TagOwner equal to this instance.
const (
	TagOwner     = "eniwire.io/instance-id"
	TagCluster   = "eniwire.io/cluster"
	TagCreatedAt = "eniwire.io/created-at"
	TagOpID      = "eniwire.io/op-id"
	// TagGroupSet marks the ENI of a pod security-group set (journal.ENI.GroupSet), its value the set's key.
	TagGroupSet = "eniwire.io/security-group-set"
)

// Books is the controller's journaled state as the Manager sees it.
type Books interface {
	// Update applies fn to the state under the books' lock and journals the result before it returns. When fn
	// or the journal write fails, the state is as before.
	Update(ctx context.Context, fn func(st *journal.State) error) error
	// View runs fn on the state under the lock; fn must not keep or change it.
	View(fn func(st *journal.State))
}

// IMDS is what the instance metadata shows of the instance's ENIs. It lags EC2, so it only informs the
// reconcile, except for a new instance's first view of its primary ENI (ViewFromIMDS).
type IMDS interface {
	// ENIMACs lists the MACs of the ENIs IMDS shows.
	ENIMACs(ctx context.Context) ([]string, error)
	// ENIs lists the ENIs IMDS shows, settled ones only (metadata.ENIs).
	ENIs(ctx context.Context) ([]metadata.IMDSENI, error)
}

// Config is the node's part of every request.
type Config struct {
	InstanceID     string
	Cluster        string
	SubnetID       string
	SubnetCIDR     string
	SecurityGroups []string
	// SubnetCIDROf returns the CIDR of another subnet of the VPC from what the caller knows already, or ""; an
	// adopted ENI of that subnet gets its gateway from it. It runs under the books' lock: no I/O. May be nil.
	SubnetCIDROf func(subnetID string) string
	// MaxENIs is the instance type's limit, primary included.
	MaxENIs int
	// GCGrace: our available ENIs younger than this are left alone (a create may be in flight elsewhere).
	GCGrace time.Duration
	// VisibilityGrace: a books ENI that EC2 does not list is left alone this long after its last change.
	VisibilityGrace time.Duration
	// WaitTimeout bounds one wait for an ENI to become available during a release.
	WaitTimeout time.Duration
}

// Manager runs the commit steps and the reconciler. Steps of one operation must not run concurrently; the pool
// manager is its only caller.
type Manager struct {
	cfg   Config
	ec2   ec2client.EC2API
	imds  IMDS
	books Books
	clock clock.Clock
	log   *slog.Logger

	mu sync.Mutex
	// occupied holds the device indexes EC2 showed attached at the last reconcile, ours or not.
	occupied map[int]string
	// needReconcile is set by a surprising answer; attaches wait for a reconcile.
	needReconcile bool
	// reconciles counts the reconciles that reached the books (ownAvailableDue).
	reconciles int
	// ownListOwed: the first reconcile of empty books left the list of our own available ENIs to the next.
	ownListOwed bool
	// limitCap lowers MaxENIs when EC2 refused an attach that our count allowed: it is set by the reconcile
	// that follows the refusal (capAtReconcile) to the number of ENIs EC2 then shows attached.
	limitCap       int
	capAtReconcile bool
	// capSince is when limitCap was set; capWait is how long it holds before the node tries the type's limit
	// again (doubling each time EC2 proves the lower limit again).
	capSince time.Time
	capWait  time.Duration
	// fresh are ops whose Created record reserved a device index in this process and whose attach has not
	// been called yet: their first attach needs no Describe. Lost on a crash, which is the point.
	fresh map[string]bool
	// foreign are the ENIs someone else attached to the instance, as the last reconcile saw them: each takes
	// one of the instance's ENI slots.
	foreign map[string]bool
	// addedAt is when our own calls added an IP, for as long as a Describe may lag behind them
	// (VisibilityGrace; our unassigns are journaled: journal.State.Unassigned); lostReported are pods' IPs
	// EC2 stopped listing, reported once.
	addedAt      map[string]time.Time
	lostReported map[string]bool
}

// NewManager returns a Manager. imds may be nil.
func NewManager(cfg Config, api ec2client.EC2API, imds IMDS, books Books, clk clock.Clock, log *slog.Logger) *Manager {
	if cfg.GCGrace == 0 {
		cfg.GCGrace = 5 * time.Minute
	}
	if cfg.VisibilityGrace == 0 {
		cfg.VisibilityGrace = 2 * time.Minute
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = 2 * time.Minute
	}
	return &Manager{cfg: cfg, ec2: api, imds: imds, books: books, clock: clk, log: log,
		occupied: map[int]string{}, foreign: map[string]bool{}, fresh: map[string]bool{},
		addedAt: map[string]time.Time{}, lostReported: map[string]bool{}}
}

// subnetCIDR is the CIDR of subnetID: the node's own, or what Config.SubnetCIDROf knows.
func (m *Manager) subnetCIDR(subnetID string) string {
	if subnetID == "" || subnetID == m.cfg.SubnetID {
		return m.cfg.SubnetCIDR
	}
	if m.cfg.SubnetCIDROf != nil {
		return m.cfg.SubnetCIDROf(subnetID)
	}
	return ""
}

// NeedsReconcile reports whether a surprising answer asked for a reconcile that has not run yet.
func (m *Manager) NeedsReconcile() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.needReconcile
}

// RequestReconcile marks that the books must be checked against EC2 before the next attach.
func (m *Manager) RequestReconcile() {
	m.mu.Lock()
	m.needReconcile = true
	m.mu.Unlock()
}

// MaxENIs is the ENI limit in force: the instance type's, lowered if EC2 proved it smaller.
func (m *Manager) MaxENIs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limitCap > 0 && m.limitCap < m.cfg.MaxENIs {
		return m.limitCap
	}
	return m.cfg.MaxENIs
}

// Foreign returns the ENIs someone else attached to the instance (a trunk ENI, another CNI's, an operator's),
// as the last reconcile saw them, sorted. Each takes one of the ENI slots MaxENIs counts.
func (m *Manager) Foreign() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.foreign))
}

// Bounds of how long a learned ENI limit holds before the node tries the instance type's again.
const (
	minCapWait = 10 * time.Minute
	maxCapWait = 6 * time.Hour
)

// learnLimitLocked updates the ENI limit from a reconcile that saw attached ENIs attached to the instance
// (m.mu held). After an AttachmentLimitExceeded below the type's limit, the limit is what EC2 shows attached.
// It is raised back to the type's as soon as EC2 shows room (fewer attached than the learned limit: what
// filled the slots went), or when it has held for capWait: EC2 refuses again if it still holds, and the
// next wait is twice as long.
func (m *Manager) learnLimitLocked(attached int, now time.Time) {
	if m.capAtReconcile {
		m.capAtReconcile = false
		if n := max(attached, 1); n < m.cfg.MaxENIs {
			m.limitCap, m.capSince = n, now
			m.capWait = min(max(m.capWait*2, minCapWait), maxCapWait)
			m.log.Warn("EC2 refused an attach below the instance's ENI limit; lowering it", "limit", n,
				"typeLimit", m.cfg.MaxENIs, "retryIn", m.capWait)
		}
		return
	}
	if m.limitCap == 0 {
		return
	}
	switch {
	case attached < m.limitCap:
		m.log.Info("EC2 shows room below the learned ENI limit; raising it back to the instance type's",
			"attached", attached, "was", m.limitCap, "limit", m.cfg.MaxENIs)
	case now.Sub(m.capSince) >= m.capWait:
		m.log.Info("trying the instance type's ENI limit again", "was", m.limitCap, "limit", m.cfg.MaxENIs,
			"heldFor", now.Sub(m.capSince))
	default:
		return
	}
	m.limitCap = 0
}

// NewOpID returns a random operation id; the ClientToken is derived from it.
func NewOpID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ClientToken is the idempotency token of an operation's CreateNetworkInterface (at most 64 characters).
func ClientToken(opID string) string { return "eniwire-" + opID }

// Record returns a copy of the ENI record of opID, or ok false.
func (m *Manager) Record(opID string) (journal.ENI, bool) {
	var out journal.ENI
	ok := false
	m.books.View(func(st *journal.State) {
		if e := st.ENIByOp(opID); e != nil {
			out = e.Clone()
			ok = true
		}
	})
	return out, ok
}

// updateENI journals a change to the record of opID; a vanished record is left alone.
func (m *Manager) updateENI(ctx context.Context, opID string, fn func(e *journal.ENI)) error {
	return m.books.Update(ctx, func(st *journal.State) error {
		if e := st.ENIByOp(opID); e != nil {
			fn(e)
		}
		return nil
	})
}

// noteFailure journals the error of a step so status shows it; losing that write is harmless.
func (m *Manager) noteFailure(ctx context.Context, opID string, err error) {
	_ = m.updateENI(ctx, opID, func(e *journal.ENI) {
		e.Attempts++
		e.LastError = err.Error()
	})
}
