// Package pool holds the warm-pool arithmetic (how many IPs and ENIs the node should hold, with the AWS VPC
// CNI's meaning of WARM_ENI_TARGET, WARM_IP_TARGET, MINIMUM_IP_TARGET and MAX_ENI) and the choice of which IP a
// pod gets. It does no I/O: the node controller applies its decisions through the ENI commit.
package pool

// Targets are the operator's settings.
type Targets struct {
	// WarmENI: keep this many whole ENIs' worth of free IPs (ignored when WarmIP or MinimumIP is set).
	WarmENI int
	// WarmIP: keep this many free IPs.
	WarmIP int
	// MinimumIP: hold at least this many IPs in total.
	MinimumIP int
	// MaxENI caps the ENIs the node holds (0: the instance limit).
	MaxENI int
	// MaxPods caps the IPs the node holds: never more than its pods could use.
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
	IPs      int // secondary IPs held
	Assigned int // given to pods
	Cooldown int // released, not yet reusable
	// Closed: no secondary IP may be added to it (EC2 refuses, as IAM does on a primary ENI without the
	// cluster tag); its room does not count.
	Closed bool
}

// Counts summarises a pool.
type Counts struct {
	ENIs []ENICount
	// PendingENIs are ENIs planned or created but not attached yet: they count against the limits.
	PendingENIs int
	// PendingIPs are the secondary IPs the pending ENIs and IP assignments in flight will bring.
	PendingIPs int
}

// Total is the number of IPs held.
func (c Counts) Total() int {
	n := 0
	for _, e := range c.ENIs {
		n += e.IPs
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
	// AddIPs is how many IPs to add (on ENIs with room first, then on a new ENI).
	AddIPs int
	// NewENI asks for a new ENI holding NewENIIPs secondary IPs, because no ENI has room.
	NewENI    bool
	NewENIIPs int
	// ReleaseIPs is how many surplus free IPs may be given back.
	ReleaseIPs int
	// ReleaseENI names an ENI with no pods whose release keeps the targets.
	ReleaseENI string
	// AtLimit is set when the pool is short but the ENI or pod limits forbid growing.
	AtLimit bool
}

func (t Targets) ipMode() bool { return t.WarmIP > 0 || t.MinimumIP > 0 }

func (t Targets) maxENIs(l Limits) int {
	if t.MaxENI > 0 && t.MaxENI < l.MaxENIs {
		return t.MaxENI
	}
	return l.MaxENIs
}

// MaxPods returns the pod cap: the setting, else what the ENIs can hold (the VPC CNI's formula).
func (t Targets) MaxPodsFor(l Limits) int {
	if t.MaxPods > 0 {
		return t.MaxPods
	}
	return t.maxENIs(l)*l.IPsPerENI + 2
}

// Short returns how many IPs the pool lacks (0 when it is at or above target), capped by MaxPods.
func (t Targets) Short(l Limits, c Counts) int {
	total, free := c.Total(), c.Free()
	var short int
	if t.ipMode() {
		short = max(t.WarmIP-free, t.MinimumIP-total, 0)
	} else {
		short = max(t.WarmENI*l.IPsPerENI-free, 0)
	}
	return min(short, max(t.MaxPodsFor(l)-total, 0))
}

// Surplus returns how many free IPs exceed the target: what may be released after the hysteresis.
func (t Targets) Surplus(l Limits, c Counts) int {
	total, free := c.Total(), c.Free()
	capped := max(total-t.MaxPodsFor(l), 0)
	if !t.ipMode() {
		return capped
	}
	over := min(free-t.WarmIP, total-t.MinimumIP)
	return max(over, capped, 0)
}

// Decide computes the next step. The arithmetic is the VPC CNI's: in WARM_IP/MINIMUM_IP mode, IPs are added
// and released one by one; in WARM_ENI mode whole ENIs are added and an ENI with no pods is released when the
// others still hold the warm target. IPs that pending ENIs and assignments will bring count toward the
// target, so a caller that applies each decision to the counts (as pending) and asks again gets every ENI a
// deficit needs, and can drive them concurrently.
func (t Targets) Decide(l Limits, c Counts) Decision {
	var d Decision
	perENI := l.IPsPerENI
	if short := t.Short(l, c); short > 0 {
		short -= c.PendingIPs
		if short <= 0 {
			return d // what is in flight covers the deficit
		}
		room := 0
		for _, e := range c.ENIs {
			if !e.Closed {
				room += perENI - e.IPs
			}
		}
		if room > 0 {
			d.AddIPs = min(short, room)
			return d
		}
		if short <= c.PendingENIs*perENI-c.PendingIPs {
			return d // an ENI on its way has room for the rest: it gets the IPs once usable
		}
		if len(c.ENIs)+c.PendingENIs >= t.maxENIs(l) {
			d.AtLimit = c.PendingENIs == 0
			return d
		}
		d.NewENI = true
		d.NewENIIPs = min(perENI, max(short, 1))
		if !t.ipMode() {
			d.NewENIIPs = min(perENI, max(t.MaxPodsFor(l)-c.Total()-c.PendingIPs, 1))
		}
		return d
	}
	if t.ipMode() || c.Total() > t.MaxPodsFor(l) {
		d.ReleaseIPs = t.Surplus(l, c)
		if d.ReleaseIPs > 0 {
			return d
		}
	}
	// An ENI with nothing assigned nor cooling down may go when the rest still meets the targets.
	for _, e := range c.ENIs {
		if e.Primary || e.Assigned > 0 || e.Cooldown > 0 {
			continue
		}
		rest := Counts{PendingENIs: c.PendingENIs}
		for _, o := range c.ENIs {
			if o.ID != e.ID {
				rest.ENIs = append(rest.ENIs, o)
			}
		}
		if t.Short(l, rest) == 0 && (t.ipMode() || rest.Free() >= t.WarmENI*perENI) {
			d.ReleaseENI = e.ID
			return d
		}
	}
	return d
}
