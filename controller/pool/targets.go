// Package pool holds the warm-pool arithmetic (how many IPs and ENIs the node should hold, with the AWS VPC
// CNI's meaning of WARM_ENI_TARGET, WARM_IP_TARGET, MINIMUM_IP_TARGET, WARM_PREFIX_TARGET and MAX_ENI) and the
// choice of which IP a pod gets. It does no I/O: the node controller applies its decisions through the ENI
// commit. The arithmetic counts addresses; an ENI's room counts IPv4 slots, each a secondary IP or, in prefix
// mode, a /28 prefix of journal.PrefixAddrs addresses.
package pool

import "github.com/eniwire/eniwire/controller/journal"

// Targets are the operator's settings.
type Targets struct {
	// WarmENI: keep this many whole ENIs' worth of free IPs (ignored when WarmIP, MinimumIP or WarmPrefix is
	// set); in prefix mode an ENI's worth is all its slots as prefixes.
	WarmENI int
	// WarmPrefix: keep this many /28 prefixes' worth of free IPs (ignored when WarmIP or MinimumIP is set).
	WarmPrefix int
	// Prefixes: the node grows in /28 prefixes (ENABLE_PREFIX_DELEGATION on a Nitro type).
	Prefixes bool
	// Fallback: EC2 could not find a free /28 (a fragmented subnet), so the node grows in single IPs for now.
	// The targets keep their prefix-mode meaning.
	Fallback bool
	// WarmIP: keep this many free IPs.
	WarmIP int
	// MinimumIP: hold at least this many IPs in total.
	MinimumIP int
	// MaxENI caps the ENIs the node holds (0: the instance limit).
	MaxENI int
	// MaxPods caps the IPs the node holds: never more than its pods could use. In prefix mode growth stops
	// once it is reached, so the last prefix may take the pool up to 15 IPs past it (112 for 110).
	MaxPods int
}

// Limits are the instance type's.
type Limits struct {
	// MaxENIs is the number of ENIs the instance takes, primary included.
	MaxENIs int
	// IPsPerENI is the number of secondary IPs an ENI can hold (IPv4 per ENI minus its primary address).
	IPsPerENI int
}

// ENICount is one usable ENI as the arithmetic sees it.
type ENICount struct {
	ID       string
	Primary  bool
	Subnet   string
	Slots    int // IPv4 slots taken: secondary IPs and prefixes
	IPs      int // addresses held for pods, the prefixes' included
	Assigned int // given to pods
	Cooldown int // released, not yet reusable
	// FreeSingles are free secondary IPs; EmptyPrefixes are prefixes none of whose addresses is assigned,
	// cooling down or leaving: what a release can give back, slot by slot.
	FreeSingles   int
	EmptyPrefixes int
	// Closed: no secondary IP may be added to it (EC2 refuses, as IAM does on a primary ENI without the
	// cluster tag); its room does not count.
	Closed bool
	// Retired: pods may no longer take its addresses (custom networking moved to another subnet); its free
	// addresses do not count, and once empty it goes whatever the targets.
	Retired bool
	// Set: the ENI of a pod security-group set (View.setENICount): Closed, its IPs only those in use, never
	// released by this arithmetic.
	Set bool
}

// Counts summarises a pool.
type Counts struct {
	ENIs []ENICount
	// PendingENIs are ENIs planned or created but not attached yet: they count against the limits.
	PendingENIs int
	// PendingIPs are the addresses the pending ENIs and IP assignments in flight will bring.
	PendingIPs int
	// Waiting are the pods waiting for an IP (ADDs waiting, and ADDs answered "no IP" lately): the targets
	// count them as if they held IPs already, so growth is sized for them and the warm pool on top.
	Waiting int
}

// Total is the number of IPs held.
func (c Counts) Total() int {
	n := 0
	for _, e := range c.ENIs {
		n += e.IPs
	}
	return n
}

// SingleSlots is the number of slots holding a single IP rather than a prefix.
func (c Counts) SingleSlots() int {
	n := 0
	for _, e := range c.ENIs {
		// IPs = 16 per prefix + 1 per single, Slots = prefixes + singles.
		n += (e.Slots*journal.PrefixAddrs - e.IPs) / (journal.PrefixAddrs - 1)
	}
	return n
}

// Assigned is the number of IPs given to pods.
func (c Counts) Assigned() int {
	n := 0
	for _, e := range c.ENIs {
		n += e.Assigned
	}
	return n
}

// Free is the number of IPs a pod could get now. Unlike the VPC CNI, IPs in cooldown are not free: counting
// them would leave the pool short exactly when pods churn.
func (c Counts) Free() int {
	n := 0
	for _, e := range c.ENIs {
		n += e.IPs - e.Assigned - e.Cooldown
	}
	return n
}

// Decision is what the pool manager should do next. At most one kind of change is asked for at a time.
type Decision struct {
	// AddIPs is how many addresses to add (on ENIs with room first, then on a new ENI); Grain says in what.
	AddIPs int
	// NewENI asks for a new ENI holding NewENIIPs addresses, because no ENI has room.
	NewENI    bool
	NewENIIPs int
	// ReleaseIPs is how many surplus free addresses may be given back, in whole slots (View.Releasable); only
	// empty prefixes when PrefixesOnly (prefix mode is off: they go, single IPs take their place). At the ENI
	// limit in prefix mode it may also be free single IPs whose slots are to take prefixes: Repack, which
	// goes without the hysteresis.
	ReleaseIPs   int
	PrefixesOnly bool
	Repack       bool
	// ReleaseENI names an ENI with no pods whose release keeps the targets.
	ReleaseENI string
	// AtLimit is set when the pool is short but the ENI or pod limits forbid growing.
	AtLimit bool
}

func (t Targets) ipMode() bool { return t.WarmIP > 0 || t.MinimumIP > 0 }

// releasesIPs says whether surplus free addresses are given back (not only whole ENIs).
func (t Targets) releasesIPs() bool { return t.ipMode() || t.WarmPrefix > 0 }

// slotAddrs is how many addresses a slot brings in the configured mode.
func (t Targets) slotAddrs() int {
	if t.Prefixes {
		return journal.PrefixAddrs
	}
	return 1
}

// Grain is how many addresses one new slot brings now: a prefix's in prefix mode, one IP in fallback.
func (t Targets) Grain() int {
	if t.Fallback {
		return 1
	}
	return t.slotAddrs()
}

// warmFree is the free addresses WARM_PREFIX_TARGET or WARM_ENI_TARGET keep.
func (t Targets) warmFree(l Limits) int {
	if t.WarmPrefix > 0 {
		return t.WarmPrefix * journal.PrefixAddrs
	}
	return t.WarmENI * l.IPsPerENI * t.slotAddrs()
}

// MaxENIsFor is how many ENIs the node may hold, primary included: the instance's limit, or MAX_ENI below it.
func (t Targets) MaxENIsFor(l Limits) int {
	if t.MaxENI > 0 && t.MaxENI < l.MaxENIs {
		return t.MaxENI
	}
	return l.MaxENIs
}

// MaxPodsFor returns the pod cap: the setting, else what the ENIs can hold (the VPC CNI's formula, with a
// prefix's addresses per slot in prefix mode).
func (t Targets) MaxPodsFor(l Limits) int {
	if t.MaxPods > 0 {
		return t.MaxPods
	}
	return t.MaxENIsFor(l)*l.IPsPerENI*t.slotAddrs() + 2
}

// spare is the free IPs left once the pods waiting have theirs (negative when they are more than the free).
func (c Counts) spare() int { return c.Free() - c.Waiting }

// Short returns how many IPs the pool lacks (0 when it is at or above target), capped by MaxPods: the pods
// waiting count as holding IPs, so a burst gets what it needs plus the warm target, as a MINIMUM_IP_TARGET
// tuned for it would.
func (t Targets) Short(l Limits, c Counts) int {
	total, free := c.Total(), c.spare()
	var short int
	if t.ipMode() {
		short = max(t.WarmIP-free, t.MinimumIP-total, 0)
	} else {
		short = max(t.warmFree(l)-free, 0)
	}
	return min(short, max(t.MaxPodsFor(l)-total, 0))
}

// Surplus returns how many free IPs exceed the target (the pods waiting taken out): what may be released
// after the hysteresis.
func (t Targets) Surplus(l Limits, c Counts) int {
	total, free := c.Total(), c.spare()
	capped := max(total-t.MaxPodsFor(l), 0)
	if !t.releasesIPs() {
		return capped
	}
	if !t.ipMode() {
		return max(free-t.warmFree(l), capped, 0)
	}
	over := min(free-t.WarmIP, total-t.MinimumIP)
	return max(over, capped, 0)
}

// releasable is how much of surplus the free slots can give back whole: free single IPs first, then empty
// prefixes while a whole one fits.
func releasable(surplus int, c Counts) int {
	singles, prefixes := 0, 0
	for _, e := range c.ENIs {
		singles += e.FreeSingles
		prefixes += e.EmptyPrefixes
	}
	n := min(surplus, singles)
	return n + min(prefixes, (surplus-n)/journal.PrefixAddrs)*journal.PrefixAddrs
}

// Decide computes the next step. The arithmetic is the VPC CNI's: in WARM_IP/MINIMUM_IP mode, IPs are added
// and released one by one (whole prefixes in prefix mode); in WARM_PREFIX mode prefixes are; in WARM_ENI mode
// whole ENIs are added and an ENI with no pods is released when the others still hold the warm target. IPs that pending ENIs and assignments will bring count toward the
// target, so a caller that applies each decision to the counts (as pending) and asks again gets every ENI a
// deficit needs, and can drive them concurrently.
func (t Targets) Decide(l Limits, c Counts) Decision {
	var d Decision
	perENI := l.IPsPerENI
	grain := t.Grain()
	if short := t.Short(l, c); short > 0 {
		short -= c.PendingIPs
		if short <= 0 {
			return d // what is in flight covers the deficit
		}
		if room := t.room(l, c); room > 0 {
			d.AddIPs = min(short, room)
			return d
		}
		if short <= c.PendingENIs*perENI*grain-c.PendingIPs {
			return d // an ENI on its way has room for the rest: it gets the IPs once usable
		}
		if len(c.ENIs)+c.PendingENIs >= t.MaxENIsFor(l) {
			// An empty retired ENI holds the slot a new one needs.
			if id := emptyRetired(c); id != "" {
				d.ReleaseENI = id
				return d
			}
			if n := t.repack(l, c); n > 0 {
				d.ReleaseIPs, d.Repack = n, true
				return d
			}
			d.AtLimit = c.PendingENIs == 0
			return d
		}
		d.NewENI = true
		d.NewENIIPs = min(perENI*grain, max(short, 1))
		if !t.releasesIPs() {
			d.NewENIIPs = min(perENI*grain, max(t.MaxPodsFor(l)-c.Total()-c.PendingIPs, 1))
		}
		return d
	}
	if t.releasesIPs() || c.Total() > t.MaxPodsFor(l) {
		d.ReleaseIPs = releasable(t.Surplus(l, c), c)
		if d.ReleaseIPs > 0 {
			return d
		}
	}
	if n := t.repack(l, c); n > 0 {
		d.ReleaseIPs, d.Repack = n, true
		return d
	}
	// Out of prefix mode, empty prefixes go back; the pool grows single IPs in their place if it needs to.
	if !t.Prefixes {
		n := 0
		for _, e := range c.ENIs {
			n += e.EmptyPrefixes
		}
		if n > 0 {
			d.ReleaseIPs, d.PrefixesOnly = n*journal.PrefixAddrs, true
			return d
		}
	}
	// An ENI with nothing assigned nor cooling down may go when the rest still meets the targets. One that
	// holds a prefix may also go when the rest can meet them by growing on its own free slots: a prefix cannot
	// be given back in part, so the last ENI's would otherwise keep the warm pool, and the ENI, for good.
	if id := emptyRetired(c); id != "" {
		d.ReleaseENI = id
		return d
	}
	for _, e := range c.ENIs {
		if e.Primary || e.Set || e.Assigned > 0 || e.Cooldown > 0 {
			continue
		}
		rest := Counts{PendingENIs: c.PendingENIs, Waiting: c.Waiting}
		for _, o := range c.ENIs {
			if o.ID != e.ID {
				rest.ENIs = append(rest.ENIs, o)
			}
		}
		short := t.Short(l, rest)
		if short == 0 && (t.ipMode() || rest.spare() >= t.warmFree(l)) ||
			e.EmptyPrefixes > 0 && short > 0 && short <= t.room(l, rest) {
			d.ReleaseENI = e.ID
			return d
		}
	}
	return d
}

// emptyRetired returns a retired secondary ENI that no pod holds and no address cools down on, or "".
func emptyRetired(c Counts) string {
	for _, e := range c.ENIs {
		if e.Retired && !e.Primary && e.Assigned == 0 && e.Cooldown == 0 {
			return e.ID
		}
	}
	return ""
}

// repack returns how many free single IPs to give back so that their slots take /28 prefixes, or 0. It
// applies when prefixes are asked for again (prefix mode, no fallback) while every slot the node may hold is
// taken, some by free single IPs: what the single-IP fallback leaves behind once it filled the ENIs. Nothing
// else gives such a slot back, and the node would stay at one address a slot, below its max pods. All of
// them go at once, so that pods that come meanwhile cannot take them back one by one; the pool then grows
// prefixes in their slots as its targets ask.
func (t Targets) repack(l Limits, c Counts) int {
	if !t.Prefixes || t.Fallback || c.PendingENIs > 0 || c.PendingIPs > 0 || c.Total() >= t.MaxPodsFor(l) ||
		len(c.ENIs) < t.MaxENIsFor(l) || t.room(l, c) > 0 {
		return 0
	}
	singles := 0
	for _, e := range c.ENIs {
		if !e.Closed {
			singles += e.FreeSingles
		}
	}
	return singles
}

// room is how many addresses the ENIs of c can still take on their free slots, at the current grain.
func (t Targets) room(l Limits, c Counts) int {
	n := 0
	for _, e := range c.ENIs {
		if !e.Closed {
			n += (l.IPsPerENI - e.Slots) * t.Grain()
		}
	}
	return n
}
