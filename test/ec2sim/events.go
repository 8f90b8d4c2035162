package ec2sim

import "sync"

// Event is a change of the simulated state that the world outside EC2 can see (the vpcfabric turns
// them into kernel objects). Events are delivered in the order the changes happened.
type Event interface{ EventKind() string }

// InstanceAdded: an instance is running (its primary ENI follows as ENIAttached).
type InstanceAdded struct{ Instance Instance }

// ENIAttached: an attachment reached "attached". IPs are all private IPs of the ENI, primary first.
// When the ENI already had secondary IPs or prefixes (IPv4 or IPv6), an IPsAssigned with them follows.
type ENIAttached struct {
	InstanceID, ENIID, MAC string
	DeviceIndex, CardIndex int
	SubnetID, SubnetCIDR   string
	Gateway                string
	PrimaryIP              string
	IPs                    []string
	Prefixes               []string
}

// ENIDetached: an attachment reached "detached" (or its instance was terminated).
type ENIDetached struct {
	InstanceID, ENIID, MAC string
	DeviceIndex, CardIndex int
	SubnetID, SubnetCIDR   string
	PrimaryIP              string
}

// IPsAssigned: secondary IPs or /28 prefixes, or IPv6 addresses or /80 prefixes, were added to an ENI.
// InstanceID is empty when the ENI is not attached.
type IPsAssigned struct {
	InstanceID, ENIID   string
	IPs, Prefixes       []string
	IPv6s, IPv6Prefixes []string
}

// IPsUnassigned: secondary IPs or prefixes, or IPv6 addresses or prefixes, were removed from an ENI.
type IPsUnassigned struct {
	InstanceID, ENIID   string
	IPs, Prefixes       []string
	IPv6s, IPv6Prefixes []string
}

// InstanceTerminated: an instance is gone; DeletedENIs went with it (DeleteOnTermination), the ENIs it
// had otherwise were detached first (ENIDetached events precede this one).
type InstanceTerminated struct {
	InstanceID  string
	DeletedENIs []string
}

// SecurityGroupChanged: a security group was added, its rules changed, or it was deleted (Deleted, with
// no Rules). Rules are all of the group's rules after the change.
type SecurityGroupChanged struct {
	GroupID, VPCID string
	Rules          SecurityGroupRules
	Deleted        bool
}

// ENISecurityGroupsChanged: the security groups an ENI carries were replaced (ModifyNetworkInterfaceAttribute).
// InstanceID is empty when the ENI is not attached; an ENI's groups at its attachment are those of
// Sim.ENI, as ENIAttached does not carry them.
type ENISecurityGroupsChanged struct {
	InstanceID, ENIID string
	Groups            []string
}

func (InstanceAdded) EventKind() string            { return "InstanceAdded" }
func (ENIAttached) EventKind() string              { return "ENIAttached" }
func (ENIDetached) EventKind() string              { return "ENIDetached" }
func (IPsAssigned) EventKind() string              { return "IPsAssigned" }
func (IPsUnassigned) EventKind() string            { return "IPsUnassigned" }
func (InstanceTerminated) EventKind() string       { return "InstanceTerminated" }
func (SecurityGroupChanged) EventKind() string     { return "SecurityGroupChanged" }
func (ENISecurityGroupsChanged) EventKind() string { return "ENISecurityGroupsChanged" }

// subscriber queues without bound so that emitting never blocks the state lock, and a pump goroutine
// hands events to the channel in order.
type subscriber struct {
	mu     sync.Mutex
	queue  []Event
	wake   chan struct{}
	done   chan struct{}
	out    chan Event
	closed bool
}

// Subscribe returns every state change from now on, in order, and a cancel func that closes the channel.
// A slow reader never blocks the simulator; events wait in an unbounded queue.
func (s *Sim) Subscribe(buffer int) (<-chan Event, func()) {
	sub := &subscriber{wake: make(chan struct{}, 1), done: make(chan struct{}), out: make(chan Event, buffer)}
	s.mu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = sub
	s.mu.Unlock()
	go sub.pump()
	var once sync.Once
	return sub.out, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, id)
			s.mu.Unlock()
			sub.mu.Lock()
			sub.closed = true
			sub.mu.Unlock()
			close(sub.done)
		})
	}
}

func (sub *subscriber) pump() {
	defer close(sub.out)
	for {
		sub.mu.Lock()
		q := sub.queue
		sub.queue = nil
		sub.mu.Unlock()
		for _, ev := range q {
			select {
			case sub.out <- ev:
			case <-sub.done:
				return
			}
		}
		select {
		case <-sub.wake:
		case <-sub.done:
			return
		}
	}
}

// emit is called with s.mu held, so events are queued in the order of the changes.
func (s *Sim) emit(ev Event) {
	for _, sub := range s.subs {
		sub.mu.Lock()
		if !sub.closed {
			sub.queue = append(sub.queue, ev)
		}
		sub.mu.Unlock()
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}
