package cnitest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/internal/testenv"
)

// debianPluginDir holds Debian's reference plugins (portmap).
const debianPluginDir = "/usr/lib/cni"

// deployConflist is the shipped conflist with the agent socket and log file pointed at the test's, and the
// spec version pinned: Debian's portmap speaks at most 1.0.0, while the shipped file also offers 1.1.0 to
// runtimes whose plugins know it.
func deployConflist(t testing.TB, socket, cniVersion string, withPortmap bool) *libcni.NetworkConfigList {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/10-eniwire.conflist")
	if err != nil {
		t.Fatalf("reading deploy conflist: %v", err)
	}
	var list map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("deploy conflist is not JSON: %v", err)
	}
	list["cniVersion"] = cniVersion
	delete(list, "cniVersions")
	list["name"] = fmt.Sprintf("eniwire-test-%d", os.Getpid())
	plugins := list["plugins"].([]any)
	eni := plugins[0].(map[string]any)
	eni["agentSocket"] = socket
	eni["logFile"] = t.TempDir() + "/plugin.log"
	if !withPortmap {
		list["plugins"] = plugins[:1]
	}
	b, _ := json.Marshal(list)
	cl, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatalf("parsing conflist: %v", err)
	}
	return cl
}

func newLibcni(t testing.TB) *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{pluginDir, debianPluginDir}, t.TempDir(), nil)
}

func runtimeConf(id string, pod ns.NetNS, ports ...int) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: id, NetNS: pod.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "libcni"}, {"K8S_POD_NAME", id}, {"K8S_POD_UID", "uid-" + id}},
	}
	if len(ports) == 2 {
		rt.CapabilityArgs = map[string]any{"portMappings": []map[string]any{
			{"hostPort": ports[0], "containerPort": ports[1], "protocol": "tcp"},
		}}
	}
	return rt
}

// inNode runs f with the goroutine's thread inside node, so libcni's exec starts the plugins there.
func inNode(t testing.TB, node ns.NetNS, f func() error) error {
	t.Helper()
	var err error
	if doErr := node.Do(func(ns.NetNS) error { err = f(); return nil }); doErr != nil {
		t.Fatalf("entering node: %v", doErr)
	}
	return err
}

func TestLibcniWiresPodsChainedWithPortmap(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireTool(t, "iptables")
	if _, err := os.Stat(debianPluginDir + "/portmap"); err != nil {
		testenv.Unavailable(t, "Debian's containernetworking-plugins (portmap) is not installed")
	}
	const nodeIP = "10.215.255.1"
	node := NewNode(t, nodeIP)
	agent := StartAgent(t, node, AgentOptions{Binary: bins.Agent, SubnetCIDR: "10.215.0.0/20", WarmIPs: 3})
	list := deployConflist(t, agent.Socket, "1.0.0", true)
	eniwireOnly := &libcni.NetworkConfigList{Name: list.Name, CNIVersion: list.CNIVersion, Plugins: list.Plugins[:1]}
	cninet := newLibcni(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	web, client, other := NewNS(t), NewNS(t), NewNS(t)
	pods := []struct {
		id    string
		ns    ns.NetNS
		ports []int
	}{{"web", web, []int{18080, 8080}}, {"client", client, nil}, {"other", other, nil}}
	rts := map[string]*libcni.RuntimeConf{}
	ips := map[string]string{}
	for _, p := range pods {
		rt := runtimeConf(p.id, p.ns, p.ports...)
		rts[p.id] = rt
		var res types.Result
		err := inNode(t, node, func() (err error) { res, err = cninet.AddNetworkList(ctx, list, rt); return err })
		if err != nil {
			t.Fatalf("ADD %s through libcni: %v", p.id, err)
		}
		cur, err := current.NewResultFromResult(res)
		if err != nil || len(cur.IPs) != 1 {
			t.Fatalf("ADD %s result = %v, %v", p.id, res, err)
		}
		ips[p.id] = cur.IPs[0].Address.IP.String()
		// Debian's portmap (1.1.1) fails CHECK on its IPv6 chain even for IPv4-only pods, so CHECK runs over the
		// eniwire entry alone; libcni finds the cached result of the chained ADD under the same network name.
		if err := inNode(t, node, func() error { return cninet.CheckNetworkList(ctx, eniwireOnly, rt) }); err != nil {
			t.Fatalf("CHECK %s through libcni: %v", p.id, err)
		}
	}

	t.Run("a pod reaches the node", func(t *testing.T) {
		addr := Serve(t, node, nodeIP, "node")
		if got, err := Fetch(client, addr); err != nil || got != "node" {
			t.Fatalf("fetch = %q, %v", got, err)
		}
	})
	t.Run("a pod reaches another pod on the node", func(t *testing.T) {
		addr := Serve(t, web, ips["web"], "web")
		if got, err := Fetch(other, addr); err != nil || got != "web" {
			t.Fatalf("fetch = %q, %v", got, err)
		}
	})
	t.Run("a host port reaches the pod through portmap", func(t *testing.T) {
		Serve(t, web, ips["web"]+":8080", "via hostport")
		if got, err := Fetch(client, nodeIP+":18080"); err != nil || got != "via hostport" {
			t.Fatalf("fetch %s:18080 = %q, %v", nodeIP, got, err)
		}
	})

	for _, p := range pods {
		if err := inNode(t, node, func() error { return cninet.DelNetworkList(ctx, list, rts[p.id]) }); err != nil {
			t.Fatalf("DEL %s through libcni: %v", p.id, err)
		}
	}
	// The agent removes the host veths in the background after DEL.
	if links := LinksGone(t, node, plumbing.HostVethPrefix, 5*time.Second); len(links) != 0 {
		t.Errorf("host veths left 5s after DEL: %v", links)
	}
	if as := agent.Assignments(t); len(as) != 0 {
		t.Errorf("assignments left after DEL: %+v", as)
	}
}

// TestLibcniStatusAndGCAtSpec110 uses the agent double: "the pool is empty" has to be exact here, and the real
// agent refills its pool from EC2 on its own schedule. An empty pool is no reason for STATUS to fail
// (status_test.go runs the real agent full).
func TestLibcniStatusAndGCAtSpec110(t *testing.T) {
	testenv.RequireRoot(t)
	node := NewNode(t, "10.216.255.1")
	agent := StartAgentDouble(t, node, []string{"10.216.0.10", "10.216.0.11"})
	list := deployConflist(t, agent.Socket, "1.1.0", false)
	cninet := newLibcni(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := inNode(t, node, func() error { return cninet.GetStatusNetworkList(ctx, list) }); err != nil {
		t.Fatalf("STATUS with a free IP: %v", err)
	}
	for _, id := range []string{"kept", "forgotten"} {
		rt := runtimeConf(id, NewNS(t))
		if err := inNode(t, node, func() error { _, err := cninet.AddNetworkList(ctx, list, rt); return err }); err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
	}
	if err := inNode(t, node, func() error { return cninet.GetStatusNetworkList(ctx, list) }); err != nil {
		t.Fatalf("STATUS with the pool empty = %v, want success", err)
	}
	gc := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: "kept", IfName: "eth0"}}}
	if err := inNode(t, node, func() error { return cninet.GCNetworkList(ctx, list, gc) }); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if as := agent.Assignments(); len(as) != 1 || as[0].ContainerID != "kept" {
		t.Fatalf("after GC the agent holds %+v, want only kept", as)
	}
	if err := inNode(t, node, func() error { return cninet.GetStatusNetworkList(ctx, list) }); err != nil {
		t.Fatalf("STATUS after GC freed an IP: %v", err)
	}
}
