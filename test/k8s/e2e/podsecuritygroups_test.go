package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/k8s/cluster"
)

const podSecurityGroupsCase = "12. security groups for pods: a SecurityGroupPolicy's pods on an ENI of its group, the database admits them alone"

// The database's port, and how many dials each check makes.
const (
	dbPort  = 5432
	sgTries = 3
	// sgCooldown is the case's IP_COOLDOWN_PERIOD and ENIWIRE_RELEASE_DELAY.
	sgCooldown = "10s"
)

// podSecurityGroups makes three groups as an operator would, tagged for the cluster: db-clients, which
// admits tcp/8080 from its own members and from web-tier only, web-tier, and db, the VPC host's (the
// database), which admits tcp/5432 from db-clients only. Two SecurityGroupPolicies, written as users write
// them, give the pods labelled app=db-client the group db-clients and those labelled app=web web-tier, and
// ENABLE_POD_ENI turns on (strict mode, the default). On node 1, the
// two db-client pods come up Ready (kubelet's probes answer in strict mode) on one ENI whose groups in EC2
// are exactly [db-clients], created for them; a pod of the default pool does not. The database answers
// each db-client pod as itself and refuses the other pod (its drops counted by the VPC). On the same node,
// strict mode sends pod-to-pod packets through the VPC: one db-client pod reaches the other, the web-tier
// pod (another set, on an ENI of its own) reaches it too, the default
// pod's packets to it are dropped by db-clients' rules. In standard mode the default pod reaches it
// directly, and with external SNAT (the other SNAT mode) the database still answers the db-client pod as
// itself and refuses the other. Once the pods are gone the sets' ENIs go back (the case runs with a 10 s
// cooldown and release delay, so that it waits seconds for them, not minutes).
func (s *suite) podSecurityGroups(t *testing.T) string {
	ctx := context.Background()
	n := s.node1
	if err := s.c.InstallEniwire(ctx, "k8s-test"); err != nil {
		t.Fatal(err)
	}
	tagged := map[string]string{"kubernetes.io/cluster/" + s.c.Name: "owned"}
	clients := addGroup(t, s.c, ec2sim.SecurityGroupSpec{VPCID: n.Instance.VPCID, Name: "db-clients", Tags: tagged,
		Rules: &ec2sim.SecurityGroupRules{Egress: ec2sim.AllTraffic()}})
	web := addGroup(t, s.c, ec2sim.SecurityGroupSpec{VPCID: n.Instance.VPCID, Name: "web-tier", Tags: tagged,
		Rules: &ec2sim.SecurityGroupRules{Egress: ec2sim.AllTraffic(), Ingress: ec2sim.AllTraffic()}})
	if err := s.c.Sim.SetSecurityGroupRules(clients, ec2sim.SecurityGroupRules{Egress: ec2sim.AllTraffic(), Ingress: []ec2sim.Permission{
		{Protocol: ec2sim.ProtocolTCP, FromPort: 8080, ToPort: 8080, Groups: []string{clients, web}}}}); err != nil {
		t.Fatal(err)
	}
	db := addGroup(t, s.c, ec2sim.SecurityGroupSpec{VPCID: n.Instance.VPCID, Name: "db", Rules: &ec2sim.SecurityGroupRules{
		Egress:  ec2sim.AllTraffic(),
		Ingress: []ec2sim.Permission{{Protocol: ec2sim.ProtocolTCP, FromPort: dbPort, ToPort: dbPort, Groups: []string{clients}}}}})
	vpc := s.c.Fabric.VPCHost()
	if err := s.c.Fabric.SetVPCHostSecurityGroups(db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.Fabric.SetVPCHostSecurityGroups() })
	whoami(t, vpc.NetnsPath, fmt.Sprintf(":%d", dbPort))
	if err := s.c.Fabric.WaitSecurityGroups(ctx); err != nil {
		t.Fatal(err)
	}

	applySecurityGroupPolicy(t, s.c, "db-access", "db-client", clients)
	applySecurityGroupPolicy(t, s.c, "web-access", "web", web)
	// A short cooldown and release delay for this case alone: the ENIs the cases before emptied, and the
	// sets' own at the end, go back in seconds instead of three minutes (cooldown 120 s, delay 60 s).
	s.setAgentEnv(t, "ENABLE_POD_ENI=true", "IP_COOLDOWN_PERIOD="+sgCooldown, "ENIWIRE_RELEASE_DELAY="+sgCooldown)
	t.Cleanup(func() {
		s.deleteWorkloads(t)
		_, _ = s.c.Kubectl(context.Background(), "delete", "securitygrouppolicy", "-n", ns, "db-access", "web-access", "--ignore-not-found")
		s.setAgentEnv(t, "ENABLE_POD_ENI=false", "POD_SECURITY_GROUP_ENFORCING_MODE=strict", "IP_COOLDOWN_PERIOD=120s",
			"ENIWIRE_RELEASE_DELAY=60s", "AWS_VPC_K8S_CNI_EXTERNALSNAT=false", "ENIWIRE_SERVICE_CIDRS=")
	})
	if err := s.c.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The cases before may leave the node's ENI slots full of emptied ENIs, which go after the cooldown
	// and the release delay: the set's ENI needs one.
	if err := waitFreeSlots(ctx, s.c, n, 2, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustCreate(t, "db-client", s.c.Client.AppsV1().Deployments(ns).Create, deployment("db-client", n.Name, 2))
	mustCreate(t, "other", s.c.Client.CoreV1().Pods(ns).Create, pod("other", n.Name, 0))
	mustCreate(t, "web", s.c.Client.CoreV1().Pods(ns).Create, pod("web", n.Name, 0))
	members, err := waitPodsReady(ctx, s.c, ns, "app=db-client", 2, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	others, err := waitPodsReady(ctx, s.c, ns, "app=other", 1, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	webs, err := waitPodsReady(ctx, s.c, ns, "app=web", 1, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	member, peer, other, webIP := members[0].Status.PodIP, members[1].Status.PodIP, others[0].Status.PodIP, webs[0].Status.PodIP

	setENI := eniHolding(s.c, n, member)
	if setENI == nil || !slices.Equal(sortedGroups(setENI), []string{clients}) {
		t.Fatalf("db-client pod %s is on ENI %+v, want one whose groups are exactly [%s]", member, setENI, clients)
	}
	if e := eniHolding(s.c, n, peer); e == nil || e.ID != setENI.ID {
		t.Errorf("the second db-client pod %s is on ENI %+v, want the set's %s", peer, e, setENI.ID)
	}
	webENI := eniHolding(s.c, n, webIP)
	if webENI == nil || !slices.Equal(sortedGroups(webENI), []string{web}) {
		t.Fatalf("web pod %s is on ENI %+v, want one whose groups are exactly [%s]", webIP, webENI, web)
	}
	if e := eniHolding(s.c, n, other); e == nil || slices.Contains(e.Groups, clients) {
		t.Errorf("the default pod %s is on ENI %+v, which carries db-clients", other, e)
	}

	seen := func(from, host string, port int) (ok int, r dialResult) {
		r, _ = dialFrom(ctx, n, from, "http", host, port, sgTries)
		return len(r.Responses), r
	}
	if ok, r := seen(member, vpc.IP.String(), dbPort); ok != sgTries || !slices.Equal(slices.Compact(r.Responses), []string{member}) {
		t.Errorf("db-client %s to the database: %d/%d answered, seen as %v (errors %v), want every dial, as itself; what the packets did:%s",
			member, ok, sgTries, r.Responses, first(r.Errors, 2), diagnose(ctx, n, vpc.IP.String()))
	}
	drops, _ := s.c.Fabric.VPCHostSecurityGroupDrops()
	if ok, r := seen(other, vpc.IP.String(), dbPort); ok != 0 {
		t.Errorf("the default pod %s reached the database %d/%d times (%v), want refused", other, ok, sgTries, r.Responses)
	}
	if after, _ := s.c.Fabric.VPCHostSecurityGroupDrops(); after <= drops {
		t.Errorf("the database's group dropped %d packets before the default pod's dials and %d after, want more", drops, after)
	}
	if ok, r := seen(peer, member, 8080); ok != sgTries {
		t.Errorf("db-client %s to db-client %s on the same node: %d/%d answered (errors %v), want every dial (db-clients admits its members)",
			peer, member, ok, sgTries, first(r.Errors, 2))
	}
	if ok, r := seen(webIP, member, 8080); ok != sgTries {
		t.Errorf("web-tier pod %s to db-client %s on the same node: %d/%d answered (errors %v), want every dial (db-clients admits web-tier)",
			webIP, member, ok, sgTries, first(r.Errors, 2))
	}
	eniDrops, _ := s.c.Fabric.SecurityGroupDrops(setENI.ID)
	if ok, _ := seen(other, member, 8080); ok != 0 {
		t.Errorf("the default pod %s reached db-client %s on the same node %d/%d times, want refused by db-clients (strict mode)", other, member, ok, sgTries)
	}
	if after, _ := s.c.Fabric.SecurityGroupDrops(setENI.ID); after <= eniDrops {
		t.Errorf("the set's ENI %s dropped %d packets before the default pod's dials and %d after: they did not take the VPC's way", setENI.ID, eniDrops, after)
	}

	// Standard mode, and external SNAT (the other SNAT mode, in the same rollout): same-node traffic takes
	// the direct path, which the groups do not see; the database still judges what leaves by the set's ENI,
	// and admits the set's pod alone. The running pods' entries follow the mode the agent starts with.
	s.setAgentEnv(t, "POD_SECURITY_GROUP_ENFORCING_MODE=standard", "AWS_VPC_K8S_CNI_EXTERNALSNAT=true",
		"ENIWIRE_SERVICE_CIDRS="+cluster.ServiceCIDR)
	direct := 0
	for end := time.Now().Add(time.Minute); time.Now().Before(end) && direct != sgTries; time.Sleep(2 * time.Second) {
		direct, _ = seen(other, member, 8080)
	}
	if direct != sgTries {
		t.Errorf("standard mode: the default pod %s reached db-client %s on the same node %d/%d times, want every dial (the direct path)", other, member, direct, sgTries)
	}
	if _, err := waitPodsReady(ctx, s.c, ns, "app=db-client", 2, time.Minute); err != nil {
		t.Errorf("standard mode: kubelet's probes of the db-client pods: %v", err)
	}
	if ok, r := seen(member, vpc.IP.String(), dbPort); ok != sgTries || !slices.Equal(slices.Compact(r.Responses), []string{member}) {
		t.Errorf("standard mode, external SNAT: db-client %s to the database: %d/%d answered, seen as %v (errors %v), want every dial, as itself",
			member, ok, sgTries, r.Responses, first(r.Errors, 2))
	}
	if ok, _ := seen(other, vpc.IP.String(), dbPort); ok != 0 {
		t.Errorf("standard mode, external SNAT: the default pod %s reached the database %d/%d times, want refused", other, ok, sgTries)
	}

	s.deleteWorkloads(t)
	released := time.Now()
	for eniHeld(s.c, n, setENI.ID) || eniHeld(s.c, n, webENI.ID) {
		if time.Since(released) > 4*time.Minute {
			t.Fatalf("the sets' ENIs %s and %s: one is still attached to %s 4 minutes after their pods went", setENI.ID, webENI.ID, short(n.Name))
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Sprintf("%s: 2 pods of set [db-clients] and 1 of [web-tier] Running in %.0fs on %s and %s; database %d/%d for "+
		"db-clients, 0/%d for a default pod; strict, same node via the VPC: db-clients %d/%d, web-tier %d/%d, default pod 0/%d; "+
		"standard with external SNAT: default pod %d/%d directly, database db-clients %d/%d, default pod 0/%d; "+
		"the sets' ENIs released %.0fs after their pods (cooldown and delay %s)", short(n.Name), took.Seconds(),
		setENI.ID, webENI.ID, sgTries, sgTries, sgTries, sgTries, sgTries, sgTries, sgTries, sgTries, direct, sgTries,
		sgTries, sgTries, sgTries, time.Since(released).Seconds(), sgCooldown)
}

// addGroup adds a security group to the simulated VPC and returns its id.
func addGroup(t *testing.T, c *cluster.Cluster, spec ec2sim.SecurityGroupSpec) string {
	t.Helper()
	id, err := c.Sim.AddSecurityGroup(spec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// applySecurityGroupPolicy applies, with kubectl, the SecurityGroupPolicy an EKS user writes: the pods
// labelled app=<app> in the test's namespace get the group.
func applySecurityGroupPolicy(t *testing.T, c *cluster.Cluster, name, app, group string) {
	t.Helper()
	kubectl(t, c, "wait", "--for=condition=Established", "--timeout=1m", "crd/securitygrouppolicies.vpcresources.k8s.aws")
	path := filepath.Join(t.TempDir(), "sgp.yaml")
	doc := fmt.Sprintf(`apiVersion: vpcresources.k8s.aws/v1beta1
kind: SecurityGroupPolicy
metadata:
  name: %s
  namespace: %s
spec:
  podSelector:
    matchLabels:
      app: %s
  securityGroups:
    groupIds:
      - %s
`, name, ns, app, group)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "apply", "-f", path)
}

// eniHolding is the ENI EC2 shows attached to n that holds addr (a secondary IP or an address of a /28).
func eniHolding(c *cluster.Cluster, n *cluster.Node, addr string) *ec2sim.ENIState {
	for _, e := range c.Sim.Snapshot().ENIs {
		if e.Attachment == nil || e.Attachment.InstanceID != n.Instance.ID {
			continue
		}
		if slices.Contains(e.IPs, addr) || slices.ContainsFunc(e.Prefixes, func(p string) bool { return prefixHolds(p, addr) }) {
			return &e
		}
	}
	return nil
}

// waitFreeSlots waits until EC2 shows at least free fewer ENIs attached to n than its type takes.
func waitFreeSlots(ctx context.Context, c *cluster.Cluster, n *cluster.Node, free int, within time.Duration) error {
	it, ok := ec2sim.LookupInstanceType(n.Instance.Type)
	if !ok {
		return fmt.Errorf("unknown instance type %s", n.Instance.Type)
	}
	attached := 0
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(2 * time.Second) {
		attached = 0
		for _, e := range c.Sim.Snapshot().ENIs {
			if e.Attachment != nil && e.Attachment.InstanceID == n.Instance.ID {
				attached++
			}
		}
		if attached+free <= it.MaxENIs {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s still holds %d of its type's %d ENIs after %s: no %d slots for the sets' ENIs", short(n.Name), attached,
		it.MaxENIs, within, free)
}

// eniHeld reports whether EC2 still shows the ENI attached to n.
func eniHeld(c *cluster.Cluster, n *cluster.Node, id string) bool {
	for _, e := range c.Sim.Snapshot().ENIs {
		if e.ID == id && e.Attachment != nil && e.Attachment.InstanceID == n.Instance.ID {
			return true
		}
	}
	return false
}

func sortedGroups(e *ec2sim.ENIState) []string {
	g := slices.Clone(e.Groups)
	slices.Sort(g)
	return g
}

// prefixHolds reports whether the /28 prefix holds addr.
func prefixHolds(prefix, addr string) bool {
	p, err := netip.ParsePrefix(prefix)
	a, aerr := netip.ParseAddr(addr)
	return err == nil && aerr == nil && p.Contains(a)
}
