package vpcfabric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// The world's VPC and the instance's subnet.
const (
	vpcID      = "vpc-0fab000000000001"
	subnetID   = "subnet-0fab000000000001"
	subnetCIDR = "10.0.1.0/24"
)

// world is a simulator with one VPC, one subnet and one instance, and a fabric following it.
type world struct {
	sim  *ec2sim.Sim
	fab  *Fabric
	inst ec2sim.Instance
	node Node
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, nil)
}

// newWorldWith is newWorld with more (when not nil) adding to the VPC before the instance and the fabric come.
func newWorldWith(t *testing.T, more func(sim *ec2sim.Sim) error) *world {
	t.Helper()
	cfg := ec2sim.DefaultConfig()
	cfg.Throttling = false
	sim := ec2sim.New(cfg)
	if err := sim.AddVPC(vpcID, "10.0.0.0/16"); err != nil {
		t.Fatal(err)
	}
	if err := sim.AddSubnet(ec2sim.SubnetSpec{ID: subnetID, VPCID: vpcID, CIDR: subnetCIDR}); err != nil {
		t.Fatal(err)
	}
	if more != nil {
		if err := more(sim); err != nil {
			t.Fatal(err)
		}
	}
	inst, err := sim.AddInstance(ec2sim.InstanceSpec{Type: "m5.large", SubnetID: subnetID})
	if err != nil {
		t.Fatal(err)
	}
	f := NewForTest(t, sim, Options{})
	node, err := f.Node(inst.ID)
	if err != nil {
		t.Fatalf("the instance that existed before the fabric has no node: %v", err)
	}
	return &world{sim: sim, fab: f, inst: inst, node: node}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ec2Client is the real SDK client talking to the EC2 endpoint inside the node netns, as the agent would.
func (w *world) ec2Client() *ec2.Client {
	return ec2.New(ec2.Options{
		Region:       "us-west-2",
		BaseEndpoint: aws.String(w.node.EC2URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDFABRIC", "secret", ""),
		HTTPClient:   w.node.HTTPClient(),
	})
}

// echoServer accepts TCP connections inside a netns and reports each peer's address.
func echoServer(t *testing.T, nsPath string, ip netip.Addr) (netip.AddrPort, <-chan netip.Addr) {
	t.Helper()
	return echoServerAt(t, nsPath, netip.AddrPortFrom(ip, 0))
}

// echoServerAt is echoServer on a given port (0: any).
func echoServerAt(t *testing.T, nsPath string, at netip.AddrPort) (netip.AddrPort, <-chan netip.Addr) {
	t.Helper()
	l, err := Listen(nsPath, "tcp", at.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	peers := make(chan netip.Addr, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			peers <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
			io.WriteString(c, "hello\n")
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).AddrPort(), peers
}

// bindToDevice is a dialer whose sockets send only out of dev (any device when dev is empty).
func bindToDevice(dev string) *net.Dialer {
	d := &net.Dialer{}
	if dev != "" {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.BindToDevice(int(fd), dev) })
			return errors.Join(err, serr)
		}
	}
	return d
}

// dialFrom connects from inside nsPath with the given source address, bound to dev when set, and reads the
// server's greeting.
func dialFrom(nsPath string, src netip.Addr, dev string, to netip.AddrPort, timeout time.Duration) error {
	return Do(nsPath, func() error {
		d := bindToDevice(dev)
		d.Timeout = timeout
		if src.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
		}
		c, err := d.Dial("tcp", to.String())
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(timeout))
		line, err := io.ReadAll(c)
		if err != nil {
			return err
		}
		if string(line) != "hello\n" {
			return fmt.Errorf("greeting %q", line)
		}
		return nil
	})
}

func TestNodeIsWiredLikeAnEC2Instance(t *testing.T) {
	w := newWorld(t)
	n, err := netlink.NewHandleAt(mustNS(t, w.node.NetnsPath))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	t.Run("eth0 carries the primary MAC, the primary IP with the subnet's prefix and MTU 9001", func(t *testing.T) {
		link, err := n.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		if got := link.Attrs().HardwareAddr.String(); got != w.inst.PrimaryMAC {
			t.Errorf("eth0 MAC = %s, want %s", got, w.inst.PrimaryMAC)
		}
		if got := link.Attrs().MTU; got != 9001 {
			t.Errorf("eth0 MTU = %d, want 9001", got)
		}
		addrs, err := n.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		want := w.inst.PrimaryIP + "/24"
		if len(addrs) != 1 || addrs[0].IPNet.String() != want {
			t.Errorf("eth0 addresses = %v, want [%s]", addrs, want)
		}
		if w.node.Links[w.inst.PrimaryMAC] != "eth0" {
			t.Errorf("node links = %v, want the primary MAC on eth0", w.node.Links)
		}
	})

	t.Run("the default route goes via the subnet gateway", func(t *testing.T) {
		routes, err := n.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range routes {
			if (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.String() == "10.0.1.1" {
				found = true
			}
		}
		if !found {
			t.Errorf("no default route via 10.0.1.1 in %v", routes)
		}
	})

	t.Run("the node reaches the VPC host over TCP from its primary IP", func(t *testing.T) {
		addr, peers := echoServer(t, w.fab.VPCHost().NetnsPath, w.fab.VPCHost().IP)
		if err := dialFrom(w.node.NetnsPath, netip.Addr{}, "", addr, 5*time.Second); err != nil {
			t.Fatalf("connecting to the VPC host: %v", err)
		}
		if got := <-peers; got != w.node.PrimaryIP {
			t.Errorf("VPC host saw source %s, want %s", got, w.node.PrimaryIP)
		}
	})

	t.Run("the real SDK IMDS client at its default endpoint returns the instance id", func(t *testing.T) {
		if got := nodeIMDS(t, w.node, "instance-id"); got != w.inst.ID {
			t.Errorf("IMDS instance-id = %q, want %q", got, w.inst.ID)
		}
	})

	t.Run("port 80 of the node is free for its own server while IMDS answers through the router", func(t *testing.T) {
		// A hostNetwork pod (Kubernetes' DNS HostNetwork conformance spec serves on :80) takes every address.
		l, err := Listen(w.node.NetnsPath, "tcp4", "0.0.0.0:80")
		if err != nil {
			t.Fatalf("listening on port 80 in the node: %v", err)
		}
		defer l.Close()
		if got := nodeIMDS(t, w.node, "local-ipv4"); got != w.node.PrimaryIP.String() {
			t.Errorf("IMDS local-ipv4 = %q, want %s (the instance that holds the caller's address)", got, w.node.PrimaryIP)
		}
	})

	t.Run("the internet host accepts the node's primary IP", func(t *testing.T) {
		addr, peers := echoServer(t, w.fab.Internet().NetnsPath, w.fab.Internet().IP)
		if err := dialFrom(w.node.NetnsPath, netip.Addr{}, "", addr, 5*time.Second); err != nil {
			t.Fatalf("connecting to the internet host: %v", err)
		}
		if got := <-peers; got != w.node.PrimaryIP {
			t.Errorf("internet host saw source %s, want %s", got, w.node.PrimaryIP)
		}
	})
}

// nodeIMDS reads one metadata path with the real SDK client at its default endpoint, from inside node.
func nodeIMDS(t *testing.T, node Node, path string) string {
	t.Helper()
	c := imds.New(imds.Options{HTTPClient: node.HTTPClient()})
	out, err := c.GetMetadata(waitCtx(t), &imds.GetMetadataInput{Path: path})
	if err != nil {
		t.Fatalf("reading IMDS %s: %v", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		t.Fatalf("reading IMDS %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

func mustNS(t *testing.T, path string) netns.NsHandle {
	t.Helper()
	h, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestProcessInNodeNetnsFindsAWS runs real clients as separate processes inside the node netns: curl
// speaks IMDSv2 at the default address, the AWS CLI reaches EC2 with only AWS_ENDPOINT_URL_EC2 set.
func TestProcessInNodeNetnsFindsAWS(t *testing.T) {
	w := newWorld(t)
	ctx := waitCtx(t)

	t.Run("curl gets an IMDSv2 token and the instance id", func(t *testing.T) {
		testenv.RequireTool(t, "curl")
		script := `tok=$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) &&
curl -sf -H "X-aws-ec2-metadata-token: $tok" http://169.254.169.254/latest/meta-data/instance-id`
		out, err := w.node.Command(ctx, "sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("curl in the node netns: %v: %s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != w.inst.ID {
			t.Errorf("instance-id = %q, want %q", got, w.inst.ID)
		}
	})

	t.Run("the AWS CLI describes the primary ENI through the in-netns EC2 endpoint", func(t *testing.T) {
		testenv.RequireTool(t, "aws")
		cmd := w.node.Command(ctx, "aws", "ec2", "describe-network-interfaces", "--region", "us-west-2",
			"--network-interface-ids", w.inst.PrimaryENI, "--query", "NetworkInterfaces[0].MacAddress", "--output", "text")
		cmd.Env = append(cmd.Env, "AWS_ACCESS_KEY_ID=AKIDFABRIC", "AWS_SECRET_ACCESS_KEY=secret", "AWS_EC2_METADATA_DISABLED=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws ec2 in the node netns: %v: %s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != w.inst.PrimaryMAC {
			t.Errorf("primary ENI MAC = %q, want %q", got, w.inst.PrimaryMAC)
		}
	})
}

func TestCleanupRemovesLeftoversOfACrashedRun(t *testing.T) {
	testenv.RequireRoot(t)
	prefix := fmt.Sprintf("ewfcrash%d", os.Getpid())
	for _, suffix := range []string{"vpc", "i-0123456789abcdef0"} {
		n, err := newNamespace(prefix + "-" + suffix)
		if err != nil {
			t.Fatal(err)
		}
		n.nl.Close() // as if the process died holding nothing
	}
	t.Cleanup(func() { Cleanup(prefix) })
	if n := countNetns(t, prefix); n != 2 {
		t.Fatalf("%d leftover netns before Cleanup, want 2", n)
	}
	if err := Cleanup(prefix); err != nil {
		t.Fatal(err)
	}
	if n := countNetns(t, prefix); n != 0 {
		t.Errorf("%d netns with prefix %s after Cleanup", n, prefix)
	}
}
