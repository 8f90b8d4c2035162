// Package plumbing holds the kernel work of the CNI plugin: the veth pair between node and pod, and the
// pod side's address, routes and neighbour entry. The pod's namespace is changed through a netlink socket
// opened inside it (Pod), the node's through one socket for the whole process: no thread enters a namespace.
package plumbing

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// KernelDefaultMTU is a veth's MTU when its creation names none.
const KernelDefaultMTU = 1500

// HostVethPrefix starts the name of every host-side veth eniwire creates.
const HostVethPrefix = "eniw"

// ErrNetnsMissing is returned (wrapped) when the pod's network namespace path does not exist or is not a
// network namespace.
var ErrNetnsMissing = errors.New("network namespace does not exist")

// ErrIfaceTaken is returned (wrapped) when the pod's namespace already holds the requested interface and it is
// not the peer of eniwire's host veth.
var ErrIfaceTaken = errors.New("interface already exists in the pod's network namespace")

// HostVethName is the host-side veth name for an interface of a pod: the prefix and 11 hex digits of a hash of
// key, so the same pod always gets the same name and it fits IFNAMSIZ.
func HostVethName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return HostVethPrefix + hex.EncodeToString(sum[:])[:11]
}

// Veth is a pair as SetupVeth left it.
type Veth struct {
	HostName  string
	HostIndex int
	HostMAC   net.HardwareAddr
	HostMTU   int
	PodIfName string
	PodIndex  int
	PodMAC    net.HardwareAddr
	PodMTU    int
	// Reused is true when the pair existed already (a repeated ADD) and was kept as it was.
	Reused bool
}

// SetupVeth creates the veth pair hostName <-> ifName with ifName inside the pod, both up at mtu (0: the
// kernel's default), the host end taking no IPv6 Router Advertisements or Redirects. SetMTU corrects the MTU
// when the agent's answer, which needs the host end's ifindex, says another. A changed MTU costs the kernel
// a walk of every IPv6 route of the node, so the caller creates the pair at the MTU the agent most likely
// says. A pair that already joins the two ends is reused, so a repeated ADD changes nothing; a stale host
// veth of the same name (a previous sandbox of the same pod) is replaced. Errors wrap ErrIfaceTaken where it applies.
//
// The pair is created first and the names looked at only when one is taken, so a first ADD makes no lookup
// that finds nothing; both ends get their MACs from eniwire (random, locally administered), so the host end's
// need not be read back.
func (p *Pod) SetupVeth(hostName, ifName string, mtu int) (*Veth, error) {
	hostMAC, podMAC := randomMAC(), randomMAC()
	la := netlink.NewLinkAttrs()
	la.Name, la.Flags, la.HardwareAddr, la.MTU = hostName, net.FlagUp, hostMAC, mtu
	veth := &netlink.Veth{LinkAttrs: la, PeerName: ifName, PeerHardwareAddr: podMAC,
		PeerNamespace: netlink.NsFd(int(p.ns.Fd()))}
	err := p.host.LinkAdd(veth)
	if errors.Is(err, syscall.EEXIST) {
		// A name is taken: by the pair of an earlier ADD (kept), by something else in the pod (refused), or by
		// the host veth of an earlier sandbox of the same pod, which must give way to the new one.
		v, perr := p.existingPair(hostName, ifName)
		switch {
		case perr != nil && isNotFound(perr):
			// The pair vanished while it was looked at: the agent removed the released sandbox's pair. A new
			// one takes its place below.
		case perr != nil || v != nil:
			return v, perr
		}
		if old, lerr := netlinkdump.LinkByName(p.host, hostName); lerr == nil {
			if derr := p.host.LinkDel(old); derr != nil && !isNotFound(derr) {
				return nil, fmt.Errorf("removing stale host veth %s: %w", hostName, derr)
			}
		}
		veth.Index = 0
		err = p.host.LinkAdd(veth)
	}
	if err != nil {
		return nil, fmt.Errorf("creating veth pair %s/%s: %w", hostName, ifName, err)
	}
	v, err := p.podEndUp(veth, ifName)
	if err != nil {
		_ = p.host.LinkDel(veth)
		return nil, err
	}
	return v, nil
}

// podEndUp sets the pod end of the pair just created up and reads its index; the host end was created up,
// and LinkAdd left its index in created.
func (p *Pod) podEndUp(created *netlink.Veth, ifName string) (*Veth, error) {
	if created.Index == 0 {
		host, err := netlinkdump.LinkByName(p.host, created.Name)
		if err != nil {
			return nil, fmt.Errorf("looking up host veth %s: %w", created.Name, err)
		}
		created.Index = host.Attrs().Index
	}
	pod, err := netlinkdump.LinkByName(p.nl, ifName)
	if err != nil {
		return nil, fmt.Errorf("looking up %s in the pod: %w", ifName, err)
	}
	if err := setUp(p.nl, pod); err != nil {
		return nil, fmt.Errorf("setting %s up in the pod: %w", ifName, err)
	}
	if err := learnNoRoutesOn(created.Name); err != nil {
		return nil, err
	}
	// Both ends were created at the same MTU.
	return &Veth{HostName: created.Name, HostIndex: created.Index, HostMAC: created.HardwareAddr,
		HostMTU: pod.Attrs().MTU, PodIfName: ifName, PodIndex: pod.Attrs().Index, PodMAC: pod.Attrs().HardwareAddr,
		PodMTU: pod.Attrs().MTU}, nil
}

// learnNoRoutesOn keeps the node from learning IPv6 routes on host veth name: it takes no Router
// Advertisement and no Redirect, so a pod cannot make itself the node's IPv6 router (the datapath drops
// both too; this holds where its filter is not attached yet). The sysctls are the calling thread's
// namespace's, the node's. A node without IPv6 has none to set.
func learnNoRoutesOn(name string) error {
	for _, key := range []string{"accept_ra", "accept_redirects"} {
		f, err := os.OpenFile(filepath.Join("/proc/sys/net/ipv6/conf", name, key), os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil {
			_, err = f.WriteString("0")
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			return fmt.Errorf("setting net.ipv6.conf.%s.%s=0: %w", name, key, err)
		}
	}
	return nil
}

// randomMAC is a random unicast, locally administered MAC, as the kernel gives a veth it is not told one.
func randomMAC() net.HardwareAddr {
	mac := make(net.HardwareAddr, 8)
	binary.LittleEndian.PutUint64(mac, rand.Uint64())
	mac[0] = mac[0]&^0x01 | 0x02
	return mac[:6]
}

// existingPair returns the pair when ifName in the pod is already the peer of hostName, nil when ifName does not
// exist, and ErrIfaceTaken when ifName exists but belongs to something else.
func (p *Pod) existingPair(hostName, ifName string) (*Veth, error) {
	pod, err := netlinkdump.LinkByName(p.nl, ifName)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up %s in the pod: %w", ifName, err)
	}
	host, err := netlinkdump.LinkByName(p.host, hostName)
	if err != nil && isNotFound(err) && pod.Type() == "veth" {
		// The agent may be deleting the pair of a released sandbox of this namespace: the kernel takes both
		// ends away together, so a pod end still seen a moment ago is gone too once the host end is.
		if _, lerr := netlinkdump.LinkByName(p.nl, ifName); isNotFound(lerr) {
			return nil, nil
		}
	}
	if err != nil || host.Type() != "veth" || pod.Type() != "veth" ||
		pod.Attrs().ParentIndex != host.Attrs().Index || host.Attrs().ParentIndex != pod.Attrs().Index {
		return nil, fmt.Errorf("%w: %s in %s", ErrIfaceTaken, ifName, p.Path())
	}
	v, err := p.bringUp(hostName, ifName)
	if v != nil {
		v.Reused = true
	}
	return v, err
}

// bringUp sets both ends of an existing pair up and reads their indexes and MACs.
func (p *Pod) bringUp(hostName, ifName string) (*Veth, error) {
	host, err := netlinkdump.LinkByName(p.host, hostName)
	if err != nil {
		return nil, fmt.Errorf("looking up host veth %s: %w", hostName, err)
	}
	if err := setUp(p.host, host); err != nil {
		return nil, fmt.Errorf("setting host veth %s up: %w", hostName, err)
	}
	// A pair an older plugin made may lack them.
	if err := learnNoRoutesOn(hostName); err != nil {
		return nil, err
	}
	pod, err := netlinkdump.LinkByName(p.nl, ifName)
	if err != nil {
		return nil, fmt.Errorf("looking up %s in the pod: %w", ifName, err)
	}
	if err := setUp(p.nl, pod); err != nil {
		return nil, fmt.Errorf("setting %s up in the pod: %w", ifName, err)
	}
	return &Veth{HostName: hostName, HostIndex: host.Attrs().Index, HostMAC: host.Attrs().HardwareAddr,
		HostMTU: host.Attrs().MTU, PodIfName: ifName, PodIndex: pod.Attrs().Index, PodMAC: pod.Attrs().HardwareAddr,
		PodMTU: pod.Attrs().MTU}, nil
}

// setUp sets l up unless it is (a host end is created up, a reused pair may be up already).
func setUp(h *netlink.Handle, l netlink.Link) error {
	if l.Attrs().Flags&net.FlagUp != 0 {
		return nil
	}
	return h.LinkSetUp(l)
}

// SetMTU sets mtu on both ends of the pair v, by index, where an end does not have it already; 0 changes
// nothing.
func (p *Pod) SetMTU(v *Veth, mtu int) error {
	if mtu == 0 {
		return nil
	}
	for _, end := range []struct {
		nl    *netlink.Handle
		index int
		mtu   *int
		where string
	}{
		{p.host, v.HostIndex, &v.HostMTU, "host veth " + v.HostName},
		{p.nl, v.PodIndex, &v.PodMTU, "the pod's " + v.PodIfName},
	} {
		if *end.mtu == mtu {
			continue
		}
		l := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: end.index}}
		if err := end.nl.LinkSetMTU(l, mtu); err != nil {
			return fmt.Errorf("setting MTU %d on %s: %w", mtu, end.where, err)
		}
		*end.mtu = mtu
	}
	return nil
}

// RemoveLink deletes ifName in the pod, which takes its host peer with it. A missing link is not an error;
// removed says whether something was deleted.
func (p *Pod) RemoveLink(ifName string) (removed bool, err error) {
	l, err := netlinkdump.LinkByName(p.nl, ifName)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking up %s in the pod: %w", ifName, err)
	}
	if l.Type() != "veth" {
		// Not ours to delete: eniwire only ever puts a veth there.
		return false, nil
	}
	if err := p.nl.LinkDel(l); err != nil && !isNotFound(err) {
		return false, fmt.Errorf("deleting %s in the pod: %w", ifName, err)
	}
	return true, nil
}

// RemovePodLink deletes ifName inside the namespace at netnsPath (see Pod.RemoveLink). A missing namespace is
// not an error.
func RemovePodLink(netnsPath, ifName string) (removed bool, err error) {
	if netnsPath == "" {
		return false, nil
	}
	p, err := OpenPod(netnsPath)
	if err != nil {
		if isMissingNS(err) {
			return false, nil
		}
		return false, err
	}
	defer p.Close()
	return p.RemoveLink(ifName)
}

// RemoveHostVeth deletes the host veth name when it is the link eniwire recorded: index (if non-zero) and mac
// (if non-nil) must match, so a veth a newer sandbox of the same pod created under the same name survives.
// A missing link is not an error.
func RemoveHostVeth(name string, index int, mac net.HardwareAddr) (removed bool, err error) {
	if name == "" {
		return false, nil
	}
	h := currentNS
	l, err := netlinkdump.LinkByName(h, name)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking up host veth %s: %w", name, err)
	}
	if l.Type() != "veth" || (index != 0 && l.Attrs().Index != index) ||
		(mac != nil && l.Attrs().HardwareAddr.String() != mac.String()) {
		return false, nil
	}
	if err := h.LinkDel(l); err != nil && !isNotFound(err) {
		return false, fmt.Errorf("deleting host veth %s: %w", name, err)
	}
	return true, nil
}

func openNS(path string) (ns.NetNS, error) {
	n, err := ns.GetNS(path)
	if err != nil {
		if isMissingNS(err) {
			return nil, fmt.Errorf("%w: %s", ErrNetnsMissing, path)
		}
		return nil, fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	return n, nil
}

func isMissingNS(err error) bool {
	var notExist ns.NSPathNotExistErr
	var notNS ns.NSPathNotNSErr
	return errors.As(err, &notExist) || errors.As(err, &notNS) || errors.Is(err, ErrNetnsMissing)
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENOENT)
}

// HostLink returns the host-side link name, an error saying so when it is missing.
func HostLink(name string) (netlink.Link, error) {
	l, err := netlinkdump.LinkByName(currentNS, name)
	if err != nil {
		return nil, fmt.Errorf("looking up host veth %q: %w", name, err)
	}
	return l, nil
}
