package nodenet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// errNoLink means the ENI's interface has not appeared on the node (yet): the controller retries ENIUp on
// its next round, by which time the kernel has usually created it.
var errNoLink = errors.New("no interface with this MAC")

// errNotInIMDS means IMDS does not list the ENI yet (it lags after attach); the controller retries.
var errNotInIMDS = errors.New("ENI not listed by IMDS yet")

// errNoMAC means the ENI names no MAC, by which its interface would be found.
var errNoMAC = errors.New("no MAC")

// linkByMAC finds the interface carrying an ENI's MAC.
func linkByMAC(hw net.HardwareAddr) (netlink.Link, error) {
	if len(hw) == 0 {
		return nil, fmt.Errorf("finding an ENI's interface: %w", errNoMAC)
	}
	links, err := netlinkdump.Links(nil)
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	for _, l := range links {
		// A bridge, VLAN or macvlan may copy the ENI's MAC but is not the ENI: only a NIC (or, in the
		// simulated VPC, the veth standing for one) that is no bridge port counts.
		if l.Attrs().MasterIndex == 0 && bytes.Equal(l.Attrs().HardwareAddr, hw) &&
			(l.Type() == "device" || l.Type() == "veth") {
			return l, nil
		}
	}
	return nil, fmt.Errorf("finding ENI %s: %w", hw, errNoLink)
}

// addPrimaryIP puts the ENI's primary IP (from IMDS, which lists it first) on its link as a /32.
func addPrimaryIP(ctx context.Context, md IMDS, e dptypes.ENI, l netlink.Link, log *slog.Logger) error {
	ip, err := md.PrimaryIP(ctx, e.MAC.String())
	if err != nil {
		return err
	}
	if !ip.Is4() {
		return fmt.Errorf("reading the primary IP of ENI %s: %w", e.ID, errNotInIMDS)
	}
	addrs, err := netlinkdump.Addrs(nil, l, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", l.Attrs().Name, err)
	}
	for _, a := range addrs {
		if ones, _ := a.Mask.Size(); a.IP.Equal(ip.AsSlice()) && ones == 32 {
			return nil
		}
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := netlink.AddrReplace(l, a); err != nil {
		return fmt.Errorf("adding %s/32 to %s: %w", ip, l.Attrs().Name, err)
	}
	log.Info("ENI address added", "eni", e.ID, "link", l.Attrs().Name, "ip", ip)
	return nil
}

// hostIfindex is the pod's host veth as it is now: found by name, since an ifindex alone may already
// belong to another pod's veth. ok is false when the veth is gone.
func hostIfindex(pod dptypes.Pod) (int, bool, error) {
	if pod.HostVeth == "" {
		return pod.HostIfindex, pod.HostIfindex != 0, nil
	}
	l, err := netlinkdump.LinkByName(nil, pod.HostVeth)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("finding host veth %s: %w", pod.HostVeth, err)
	}
	return l.Attrs().Index, true, nil
}

// setSysctl writes key (like "net/ipv4/ip_forward") under root (a /proc/sys) when it differs, logging the
// change.
func setSysctl(log *slog.Logger, root, key, val string) error {
	p := filepath.Join(root, key)
	cur, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading sysctl %s: %w", key, err)
	}
	if strings.TrimSpace(string(cur)) == val {
		return nil
	}
	if err := os.WriteFile(p, []byte(val), 0o644); err != nil {
		return fmt.Errorf("setting sysctl %s=%s: %w", key, val, err)
	}
	log.Info("sysctl set", "key", strings.ReplaceAll(key, "/", "."), "from", strings.TrimSpace(string(cur)), "to", val)
	return nil
}
