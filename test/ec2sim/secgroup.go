package ec2sim

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// Security groups: each belongs to one VPC and holds rules (permission.go); an ENI carries up to
// Config.SecurityGroupsPerENI of them. This file is the model and its Go API; actions_secgroup.go serves
// the EC2 actions. The vpcfabric enforces the rules, learning of them from SecurityGroupChanged and
// ENISecurityGroupsChanged.

// secGroup is a security group. Rules are in the order they were authorized.
type secGroup struct {
	ID, VPCID, Name, Description string
	Tags                         map[string]string
	Rules                        []rule
}

// SecurityGroupSpec describes a security group to add. ID is generated when empty; Name defaults to the id.
type SecurityGroupSpec struct {
	ID          string            `json:"id,omitempty"`
	VPCID       string            `json:"vpcId"`
	Name        string            `json:"name,omitempty"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	// Rules are the group's rules. Nil admits all traffic both ways (AllTraffic in and out), so that the
	// groups of seeds written before the simulator enforced rules keep passing everything; a group made
	// by CreateSecurityGroup starts as EC2's do instead (no ingress, all egress). A rule may name only
	// groups added before, or the group itself.
	Rules *SecurityGroupRules `json:"rules,omitempty"`
}

// SecurityGroupRules are what a group admits: new flows into an ENI that carries it (Ingress, by their
// source) and out of it (Egress, by their destination). Replies of an admitted flow always pass.
type SecurityGroupRules struct {
	Ingress []Permission `json:"ingress"`
	Egress  []Permission `json:"egress"`
}

// EC2's default quotas: rules per group and direction, and groups per ENI (adjustable to 16).
const (
	maxRulesPerDirection = 60
	defaultGroupsPerENI  = 5
)

func (s *Sim) groupsPerENI() int {
	if s.cfg.SecurityGroupsPerENI > 0 {
		return s.cfg.SecurityGroupsPerENI
	}
	return defaultGroupsPerENI
}

// AddSecurityGroup adds a security group to a VPC and returns its id. Names are unique within a VPC.
func (s *Sim) AddSecurityGroup(spec SecurityGroupSpec) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vpcs[spec.VPCID] == nil {
		return "", fmt.Errorf("adding security group %s: VPC %q: %w", spec.Name, spec.VPCID, ErrNotFound)
	}
	if spec.ID == "" {
		spec.ID = s.newID("sg", func(x string) bool { return s.groups[x] != nil })
	}
	if !reGroup.MatchString(spec.ID) {
		return "", fmt.Errorf("adding security group %q: id: %w", spec.ID, ErrInvalid)
	}
	if s.groups[spec.ID] != nil {
		return "", fmt.Errorf("adding security group %s: %w", spec.ID, ErrExists)
	}
	if spec.Name == "" {
		spec.Name = spec.ID
	}
	if s.groupNamedLocked(spec.VPCID, spec.Name) != nil {
		return "", fmt.Errorf("adding security group %s: name %q is taken in VPC %s: %w", spec.ID, spec.Name, spec.VPCID, ErrExists)
	}
	rules := allowAll()
	if spec.Rules != nil {
		rules = *spec.Rules
	}
	g := &secGroup{ID: spec.ID, VPCID: spec.VPCID, Name: spec.Name, Description: spec.Description, Tags: map[string]string{}}
	for k, v := range spec.Tags {
		g.Tags[k] = v
	}
	if err := s.addGroupLocked(g, rules); err != nil {
		return "", fmt.Errorf("adding security group %s: %s: %w", spec.ID, err.Message, ErrInvalid)
	}
	return g.ID, nil
}

func allowAll() SecurityGroupRules {
	return SecurityGroupRules{Ingress: AllTraffic(), Egress: AllTraffic()}
}

// addGroupLocked validates rules for the new group g, then adds it with them.
func (s *Sim) addGroupLocked(g *secGroup, rules SecurityGroupRules) *APIError {
	rs, err := s.buildRulesLocked(g, rules)
	if err != nil {
		return err
	}
	s.groups[g.ID] = g
	s.appendRulesLocked(g, rs, nil)
	s.emitGroupLocked(g, false)
	s.log.Info("security group added", "group", g.ID, "vpc", g.VPCID, "name", g.Name)
	return nil
}

// SecurityGroup returns one group with its rules.
func (s *Sim) SecurityGroup(id string) (SecurityGroupSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[id]
	if g == nil {
		return SecurityGroupSpec{}, fmt.Errorf("looking up security group %s: %w", id, ErrNotFound)
	}
	return g.spec(), nil
}

// SetSecurityGroupRules replaces every rule of a group, as a revoke of all and an authorize of rules would.
func (s *Sim) SetSecurityGroupRules(id string, rules SecurityGroupRules) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[id]
	if g == nil {
		return fmt.Errorf("setting the rules of security group %s: %w", id, ErrNotFound)
	}
	rs, err := s.buildRulesLocked(g, rules)
	if err != nil {
		return fmt.Errorf("setting the rules of security group %s: %s: %w", id, err.Message, ErrInvalid)
	}
	s.removeRulesLocked(g, func(rule) bool { return true })
	s.appendRulesLocked(g, rs, nil)
	s.emitGroupLocked(g, false)
	s.log.Info("security group rules set", "group", g.ID, "rules", len(g.Rules))
	return nil
}

// buildRulesLocked turns Go API rules into g's rules (without ids), checked as an authorize would check
// them on a group without rules.
func (s *Sim) buildRulesLocked(g *secGroup, rules SecurityGroupRules) ([]rule, *APIError) {
	var out []rule
	for _, dir := range []struct {
		egress bool
		perms  []Permission
	}{{false, rules.Ingress}, {true, rules.Egress}} {
		for _, p := range dir.perms {
			rs, err := s.rulesOfLocked(g, dir.egress, askOf(p))
			if err != nil {
				return nil, err
			}
			out = append(out, rs...)
		}
	}
	if err := (&secGroup{}).admit(out); err != nil {
		return nil, err
	}
	return out, nil
}

// admit checks that rules, new in one request, may join g: none twice in the request, none that g holds,
// and each direction within its quota.
func (g *secGroup) admit(rules []rule) *APIError {
	seen := map[ruleMatch]bool{}
	for _, r := range rules {
		m := r.match()
		if seen[m] {
			return apiErr(CodeInvalidParameterValue, "The same permission must not appear multiple times")
		}
		seen[m] = true
		if g.index(m) >= 0 {
			return apiErr(CodeInvalidPermissionDuplicate, "the specified rule \"%s\" already exists", r.text())
		}
	}
	for _, egress := range []bool{false, true} {
		n := g.count(egress)
		for _, r := range rules {
			if r.Egress == egress {
				n++
			}
		}
		if n > maxRulesPerDirection {
			return apiErr(CodeRulesPerSecurityGroupLimit, "The maximum number of rules per security group has been reached.")
		}
	}
	return nil
}

func (g *secGroup) index(m ruleMatch) int {
	return slices.IndexFunc(g.Rules, func(r rule) bool { return r.match() == m })
}

func (g *secGroup) count(egress bool) int {
	n := 0
	for _, r := range g.Rules {
		if r.Egress == egress {
			n++
		}
	}
	return n
}

// appendRulesLocked gives rules their ids (and tags) and adds them to g; it returns them as added.
func (s *Sim) appendRulesLocked(g *secGroup, rules []rule, tags []tag) []rule {
	out := make([]rule, len(rules))
	for i, r := range rules {
		r.ID = s.newRuleIDLocked()
		if len(tags) > 0 {
			r.Tags = map[string]string{}
			for _, t := range tags {
				r.Tags[t.Key] = t.Value
			}
		}
		s.ruleOwner[r.ID] = g
		out[i] = r
	}
	g.Rules = append(g.Rules, out...)
	return out
}

// removeRulesLocked takes the rules for which gone holds out of g and returns them.
func (s *Sim) removeRulesLocked(g *secGroup, gone func(rule) bool) []rule {
	var out []rule
	g.Rules = slices.DeleteFunc(g.Rules, func(r rule) bool {
		if gone(r) {
			out = append(out, r)
			delete(s.ruleOwner, r.ID)
			return true
		}
		return false
	})
	return out
}

// newRuleIDLocked names a rule without drawing from the random source that names ENIs and MACs, so that a
// world's ENI ids and MACs stay what they were before rules were modelled.
func (s *Sim) newRuleIDLocked() string {
	for {
		s.ruleSeq++
		h := fnv.New64a()
		fmt.Fprintf(h, "%d|%d", s.cfg.Seed, s.ruleSeq)
		if id := fmt.Sprintf("sgr-0%016x", h.Sum64()); s.ruleOwner[id] == nil {
			return id
		}
	}
}

// emitGroupLocked tells subscribers a group's rules as they now are, or that it is gone.
func (s *Sim) emitGroupLocked(g *secGroup, deleted bool) {
	ev := SecurityGroupChanged{GroupID: g.ID, VPCID: g.VPCID, Deleted: deleted}
	if !deleted {
		ev.Rules = g.rules()
	}
	s.emit(ev)
}

// rules is the group's rules as the Go API states them.
func (g *secGroup) rules() SecurityGroupRules {
	return SecurityGroupRules{Ingress: permissionsOf(g.Rules, false), Egress: permissionsOf(g.Rules, true)}
}

func (g *secGroup) spec() SecurityGroupSpec {
	rules := g.rules()
	return SecurityGroupSpec{ID: g.ID, VPCID: g.VPCID, Name: g.Name, Description: g.Description, Tags: cloneMap(g.Tags),
		Rules: &rules}
}

// groupNamedLocked is the group of a VPC with this name, or nil.
func (s *Sim) groupNamedLocked(vpcID, name string) *secGroup {
	for _, g := range s.groups {
		if g.VPCID == vpcID && g.Name == name {
			return g
		}
	}
	return nil
}

// groupInUseLocked reports whether an ENI carries g or a rule of another group names it: EC2 refuses to
// delete such a group.
func (s *Sim) groupInUseLocked(g *secGroup) bool {
	for _, e := range s.enis {
		if slices.Contains(e.Groups, g.ID) {
			return true
		}
	}
	for _, o := range s.groups {
		if o != g && slices.ContainsFunc(o.Rules, func(r rule) bool { return r.Group == g.ID }) {
			return true
		}
	}
	return false
}

// checkENIGroupsLocked checks the groups an ENI of vpcID is to carry: each exists and belongs to that VPC,
// and there are no more than the per-ENI quota. EC2 words the quota differently per action, so the caller
// says how (overQuota).
func (s *Sim) checkENIGroupsLocked(groups []string, vpcID string, overQuota func(quota int) *APIError) *APIError {
	if q := s.groupsPerENI(); len(groups) > q {
		return overQuota(q)
	}
	for _, id := range groups {
		switch g := s.groups[id]; {
		case g == nil:
			return errGroupNotFound(id)
		case g.VPCID != vpcID:
			return errGroupNotInVPC(id, vpcID)
		}
	}
	return nil
}

// isDefaultGroup reports whether g is its VPC's default group, which cannot be deleted.
func (s *Sim) isDefaultGroup(g *secGroup) bool {
	v := s.vpcs[g.VPCID]
	return v != nil && v.SG == g.ID && strings.EqualFold(g.Name, "default")
}
