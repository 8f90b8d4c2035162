package ec2sim

import (
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Faults injects failures into the EC2 API and lag into IMDS. Action "*" matches every action. Durations
// are virtual time of the simulator's clock.
type Faults struct {
	mu         sync.Mutex
	rng        *rand.Rand
	scripts    map[string][]string
	probs      map[string]map[string]float64
	latency    map[string]time.Duration
	drops      map[string]int
	afterApply map[string][]string
	visibility time.Duration
	imdsLag    time.Duration
	// unassignLag is how long Describe still lists an unassigned secondary IP on its ENI.
	unassignLag time.Duration
	// assignLag is how long Describe does not list an IPv6 /80 an assign just added.
	assignLag time.Duration
}

func newFaults(seed int64) *Faults {
	f := &Faults{rng: rand.New(rand.NewPCG(uint64(seed), 0xfa17))}
	f.Reset()
	return f
}

// Faults is the fault-injection control of the simulator.
func (s *Sim) Faults() *Faults { return s.faults }

// Reset removes every fault.
func (f *Faults) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts = map[string][]string{}
	f.probs = map[string]map[string]float64{}
	f.latency = map[string]time.Duration{}
	f.drops = map[string]int{}
	f.afterApply = map[string][]string{}
	f.visibility, f.imdsLag, f.unassignLag, f.assignLag = 0, 0, 0, 0
}

// Script makes the next n calls of action fail with code (queued after any earlier script).
func (f *Faults) Script(action, code string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.scripts[action] = append(f.scripts[action], code)
	}
}

// SetProbability makes each call of action fail with code with probability p (0 removes it).
func (f *Faults) SetProbability(action, code string, p float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p <= 0 {
		delete(f.probs[action], code)
		return
	}
	if f.probs[action] == nil {
		f.probs[action] = map[string]float64{}
	}
	f.probs[action][code] = p
}

// SetLatency adds d before every answer of action (0 removes it).
func (f *Faults) SetLatency(action string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d <= 0 {
		delete(f.latency, action)
		return
	}
	f.latency[action] = d
}

// DropResponses makes the next n calls of action take effect on the server while the client gets no
// answer: the connection is reset after the change is applied.
func (f *Faults) DropResponses(action string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drops[action] += n
}

// FailAfterApply makes the next n calls of action take effect on the server and then answer with code (a
// server error such as InternalError): the answer says failed, yet the change was made. Queued after any
// earlier ones.
func (f *Faults) FailAfterApply(action, code string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.afterApply[action] = append(f.afterApply[action], code)
	}
}

// takeAfterApply consumes one FailAfterApply of this call.
func (f *Faults) takeAfterApply(action string) *APIError {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.afterApply[action]
	if len(q) == 0 {
		return nil
	}
	f.afterApply[action] = q[1:]
	if len(f.afterApply[action]) == 0 {
		delete(f.afterApply, action)
	}
	return faultError(q[0])
}

// SetVisibilityDelay makes a new ENI unknown (InvalidNetworkInterfaceID.NotFound) to Describe, Attach and
// the other calls naming it for d after its creation: EC2's eventual consistency.
func (f *Faults) SetVisibilityDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.visibility = d
}

// SetIMDSLag makes a newly attached MAC, and newly assigned IPs and prefixes, show in IMDS only d after
// the change happened in EC2.
func (f *Faults) SetIMDSLag(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imdsLag = d
}

// SetUnassignLag makes DescribeNetworkInterfaces still list a secondary IP on its ENI for d after
// UnassignPrivateIpAddresses took it away (and the subnet may have given it to another ENI): EC2's eventual
// consistency right after an unassign.
func (f *Faults) SetUnassignLag(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unassignLag = d
}

// SetIPv6AssignLag makes DescribeNetworkInterfaces leave out, for d, an IPv6 /80 that AssignIpv6Addresses just
// added to its ENI: EC2's eventual consistency right after an assign, which a client that lost the assign's
// answer meets when it reads the ENI back.
func (f *Faults) SetIPv6AssignLag(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assignLag = d
}

// FaultsState is the current fault configuration (admin API, JSON).
type FaultsState struct {
	Scripts         map[string][]string           `json:"scripts"`
	Probability     map[string]map[string]float64 `json:"probability"`
	LatencyMS       map[string]int64              `json:"latencyMs"`
	Drops           map[string]int                `json:"drops"`
	AfterApply      map[string][]string           `json:"afterApply,omitempty"`
	VisibilityMS    int64                         `json:"visibilityMs"`
	IMDSLagMS       int64                         `json:"imdsLagMs"`
	UnassignLagMS   int64                         `json:"unassignLagMs,omitempty"`
	IPv6AssignLagMS int64                         `json:"ipv6AssignLagMs,omitempty"`
}

// State returns the configured faults.
func (f *Faults) State() FaultsState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := FaultsState{Scripts: map[string][]string{}, Probability: map[string]map[string]float64{},
		LatencyMS: map[string]int64{}, Drops: map[string]int{}, VisibilityMS: f.visibility.Milliseconds(),
		IMDSLagMS: f.imdsLag.Milliseconds(), UnassignLagMS: f.unassignLag.Milliseconds(),
		IPv6AssignLagMS: f.assignLag.Milliseconds()}
	for k, v := range f.scripts {
		st.Scripts[k] = append([]string(nil), v...)
	}
	for k, v := range f.probs {
		m := map[string]float64{}
		for c, p := range v {
			m[c] = p
		}
		st.Probability[k] = m
	}
	for k, v := range f.latency {
		st.LatencyMS[k] = v.Milliseconds()
	}
	for k, v := range f.drops {
		st.Drops[k] = v
	}
	for k, v := range f.afterApply {
		if st.AfterApply == nil {
			st.AfterApply = map[string][]string{}
		}
		st.AfterApply[k] = append([]string(nil), v...)
	}
	return st
}

func (f *Faults) latencyFor(action string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latency[action] + f.latency["*"]
}

// errorFor consumes a scripted fault or draws a random one for this call.
func (f *Faults) errorFor(action string) *APIError {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range []string{action, "*"} {
		if q := f.scripts[a]; len(q) > 0 {
			f.scripts[a] = q[1:]
			if len(f.scripts[a]) == 0 {
				delete(f.scripts, a)
			}
			return faultError(q[0])
		}
	}
	for _, a := range []string{action, "*"} {
		codes := make([]string, 0, len(f.probs[a]))
		for c := range f.probs[a] {
			codes = append(codes, c)
		}
		sort.Strings(codes) // a fixed order keeps seeded runs reproducible
		for _, c := range codes {
			if f.rng.Float64() < f.probs[a][c] {
				return faultError(c)
			}
		}
	}
	return nil
}

// takeDrop consumes one dropped response for this call.
func (f *Faults) takeDrop(action string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range []string{action, "*"} {
		if f.drops[a] > 0 {
			f.drops[a]--
			if f.drops[a] == 0 {
				delete(f.drops, a)
			}
			return true
		}
	}
	return false
}

func (f *Faults) visibilityDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.visibility
}

func (f *Faults) unassignLagDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unassignLag
}

func (f *Faults) ipv6AssignLagDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.assignLag
}

func (f *Faults) imdsLagDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.imdsLag
}
