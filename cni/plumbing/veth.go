// Package plumbing holds the kernel work of the CNI plugin: the veth pair between node and pod, and the
// pod side's address, routes and neighbour entry. Every function that touches the pod's network namespace
// enters it with ns.WithNetNSPath on the calling thread and starts no goroutine while inside.
package plumbing

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

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
	PodIfName string
	PodIndex  int
	PodMAC    net.HardwareAddr
	// Reused is true when the pair existed already (a repeated ADD) and was kept as it was.
	Reused bool
}

// SetupVeth creates the veth pair hostName <-> ifName with ifName inside the namespace at netnsPath, both up
// at the kernel's default MTU until SetMTU (the agent says the MTU in the answer that needs the host end's
// ifindex). A pair that already joins the two ends is reused, so a repeated ADD changes nothing; a stale host
// veth of the same name (a previous sandbox of the same pod) is replaced.
// Errors wrap ErrNetnsMissing or ErrIfaceTaken where they apply.
func SetupVeth(netnsPath, hostName, ifName string) (*Veth, error) {
	podNS, err := openNS(netnsPath)
	if err != nil {
		return nil, err
	}
	defer podNS.Close()

	if v, err := existingPair(podNS, hostName, ifName); err != nil || v != nil {
		return v, err
	}
	if old, err := linkByName(hostName); err == nil {
		// Same pod, earlier sandbox: its veth must give way to the new one.
		if err := netlink.LinkDel(old); err != nil && !isNotFound(err) {
			return nil, fmt.Errorf("removing stale host veth %s: %w", hostName, err)
		}
	}

	la := netlink.NewLinkAttrs()
	la.Name = hostName
	veth := &netlink.Veth{
		LinkAttrs:     la,
		PeerName:      ifName,
		PeerNamespace: netlink.NsFd(int(podNS.Fd())),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("creating veth pair %s/%s: %w", hostName, ifName, err)
	}
	v, err := bringUp(podNS, hostName, ifName)
	if err != nil {
		_ = netlink.LinkDel(veth)
		return nil, err
	}
	return v, nil
}

// existingPair returns the pair when ifName in the pod is already the peer of hostName, nil when ifName does not
// exist, and ErrIfaceTaken when ifName exists but belongs to something else.
func existingPair(podNS ns.NetNS, hostName, ifName string) (*Veth, error) {
	var pod netlink.Link
	err := podNS.Do(func(ns.NetNS) error {
		l, err := linkByName(ifName)
		if err != nil {
			if isNotFound(err) {
				return nil
			}
			return fmt.Errorf("looking up %s in the pod: %w", ifName, err)
		}
		pod = l
		return nil
	})
	if err != nil || pod == nil {
		return nil, err
	}
	host, err := linkByName(hostName)
	if err != nil && isNotFound(err) && pod.Type() == "veth" {
		// The agent may be deleting the pair of a released sandbox of this namespace: the kernel takes both
		// ends away together, so a pod end still seen a moment ago is gone too once the host end is.
		gone := false
		if derr := podNS.Do(func(ns.NetNS) error {
			_, lerr := linkByName(ifName)
			gone = isNotFound(lerr)
			return nil
		}); derr == nil && gone {
			return nil, nil
		}
	}
	if err != nil || host.Type() != "veth" || pod.Type() != "veth" ||
		pod.Attrs().ParentIndex != host.Attrs().Index || host.Attrs().ParentIndex != pod.Attrs().Index {
		return nil, fmt.Errorf("%w: %s in %s", ErrIfaceTaken, ifName, podNS.Path())
	}
	v, err := bringUp(podNS, hostName, ifName)
	if v != nil {
		v.Reused = true
	}
	return v, err
}

// bringUp sets both ends up and reads their indexes and MACs.
func bringUp(podNS ns.NetNS, hostName, ifName string) (*Veth, error) {
	host, err := linkByName(hostName)
	if err != nil {
		return nil, fmt.Errorf("looking up host veth %s: %w", hostName, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, fmt.Errorf("setting host veth %s up: %w", hostName, err)
	}
	v := &Veth{HostName: hostName, HostIndex: host.Attrs().Index, HostMAC: host.Attrs().HardwareAddr, PodIfName: ifName}
	err = podNS.Do(func(ns.NetNS) error {
		pod, err := linkByName(ifName)
		if err != nil {
			return fmt.Errorf("looking up %s in the pod: %w", ifName, err)
		}
		if err := netlink.LinkSetUp(pod); err != nil {
			return fmt.Errorf("setting %s up in the pod: %w", ifName, err)
		}
		v.PodIndex, v.PodMAC = pod.Attrs().Index, pod.Attrs().HardwareAddr
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// SetMTU sets mtu on both ends of the pair v, each only where it differs; 0 changes nothing.
func SetMTU(netnsPath string, v *Veth, mtu int) error {
	if mtu == 0 {
		return nil
	}
	host, err := linkByName(v.HostName)
	if err != nil {
		return fmt.Errorf("looking up host veth %s: %w", v.HostName, err)
	}
	if host.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(host, mtu); err != nil {
			return fmt.Errorf("setting MTU %d on host veth %s: %w", mtu, v.HostName, err)
		}
	}
	err = ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		pod, err := linkByName(v.PodIfName)
		if err != nil {
			return fmt.Errorf("looking up %s in the pod: %w", v.PodIfName, err)
		}
		if pod.Attrs().MTU == mtu {
			return nil
		}
		if err := netlink.LinkSetMTU(pod, mtu); err != nil {
			return fmt.Errorf("setting MTU %d on %s in the pod: %w", mtu, v.PodIfName, err)
		}
		return nil
	})
	if err != nil && isMissingNS(err) {
		return fmt.Errorf("%w: %s", ErrNetnsMissing, netnsPath)
	}
	return err
}

// RemovePodLink deletes ifName inside the namespace at netnsPath, which takes its host peer with it. A missing
// namespace or link is not an error; removed says whether something was deleted.
func RemovePodLink(netnsPath, ifName string) (removed bool, err error) {
	if netnsPath == "" {
		return false, nil
	}
	err = ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		l, err := linkByName(ifName)
		if err != nil {
			if isNotFound(err) {
				return nil
			}
			return fmt.Errorf("looking up %s in the pod: %w", ifName, err)
		}
		if l.Type() != "veth" {
			// Not ours to delete: eniwire only ever puts a veth there.
			return nil
		}
		if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting %s in the pod: %w", ifName, err)
		}
		removed = true
		return nil
	})
	if err != nil && isMissingNS(err) {
		return false, nil
	}
	return removed, err
}

// RemoveHostVeth deletes the host veth name when it is the link eniwire recorded: index (if non-zero) and mac
// (if non-nil) must match, so a veth a newer sandbox of the same pod created under the same name survives.
// A missing link is not an error.
func RemoveHostVeth(name string, index int, mac net.HardwareAddr) (removed bool, err error) {
	if name == "" {
		return false, nil
	}
	l, err := linkByName(name)
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
	if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
		return false, fmt.Errorf("deleting host veth %s: %w", name, err)
	}
	return true, nil
}

// NetnsExists reports whether path is a network namespace; the error wraps ErrNetnsMissing when it is not.
func NetnsExists(path string) error {
	n, err := openNS(path)
	if err != nil {
		return err
	}
	return n.Close()
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
	l, err := linkByName(name)
	if err != nil {
		return nil, fmt.Errorf("looking up host veth %q: %w", name, err)
	}
	return l, nil
}
