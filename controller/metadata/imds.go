// Package metadata holds what a node knows about itself at start: its identity and network from the instance
// metadata service (IMDS), and its instance type's ENI and address limits from EC2, cached on disk.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// IMDSAPI is the subset of *imds.Client this package reads, with the SDK's signatures.
type IMDSAPI interface {
	GetMetadata(ctx context.Context, in *imds.GetMetadataInput, optFns ...func(*imds.Options)) (*imds.GetMetadataOutput, error)
	GetRegion(ctx context.Context, in *imds.GetRegionInput, optFns ...func(*imds.Options)) (*imds.GetRegionOutput, error)
}

var _ IMDSAPI = (*imds.Client)(nil)

// ErrNotFound is matched (errors.Is) by the error of a metadata key IMDS does not have (HTTP 404).
var ErrNotFound = errors.New("not in instance metadata")

// notFoundError keeps the SDK's error (for its request details) and matches ErrNotFound.
type notFoundError struct {
	path string
	err  error
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("reading %s: %v: %v", e.path, ErrNotFound, e.err)
}
func (e *notFoundError) Unwrap() error        { return e.err }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// get reads one metadata key (relative to /latest/meta-data/), trimmed.
func get(ctx context.Context, md IMDSAPI, path string) (string, error) {
	out, err := md.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		var status interface{ HTTPStatusCode() int }
		if errors.As(err, &status) && status.HTTPStatusCode() == 404 {
			return "", &notFoundError{path: path, err: err}
		}
		return "", fmt.Errorf("reading %s from IMDS: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		return "", fmt.Errorf("reading %s from IMDS: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// getOptional reads a key that IMDS may legitimately lack (an ENI without secondary addresses has no
// local-ipv4s list on some instance types; prefixes and IPv6 keys exist only when used): absent is "".
func getOptional(ctx context.Context, md IMDSAPI, path string) (string, error) {
	v, err := get(ctx, md, path)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return v, err
}

// getList reads a newline-separated key, absent meaning empty.
func getList(ctx context.Context, md IMDSAPI, path string) ([]string, error) {
	v, err := getOptional(ctx, md, path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(v), nil
}

// IMDSENI is one ENI as IMDS shows it. IMDS lags behind EC2 after attach, detach, assign and unassign, so this
// is a hint to compare with EC2, never a reason on its own to forget an ENI.
type IMDSENI struct {
	MAC         string // lower case, colon-separated
	ID          string
	DeviceIndex int
	NetworkCard int
	IPs         []netip.Addr // primary first, as IMDS lists them
	// IPv4Prefixes are the /28 prefixes delegated to the ENI (ipv4-prefix), none when IMDS lists none.
	IPv4Prefixes []netip.Prefix
	SubnetID     string       // "" when IMDS does not list it
	SubnetCIDR   netip.Prefix // invalid when IMDS does not list it
	IPv6         IPv6Facts
}

// ENIs reads every ENI IMDS lists for this instance, sorted by network card and device index. A MAC whose
// device-number or interface-id is missing is being attached or detached right now: it is left out (the next
// read will show it settled), as the VPC CNI does.
func ENIs(ctx context.Context, md IMDSAPI) ([]IMDSENI, error) {
	macs, err := getList(ctx, md, "network/interfaces/macs")
	if err != nil {
		return nil, fmt.Errorf("listing ENI MACs: %w", err)
	}
	var out []IMDSENI
	for _, entry := range macs {
		eni, ok, err := readENI(ctx, md, strings.TrimSuffix(entry, "/"))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, eni)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NetworkCard != out[j].NetworkCard {
			return out[i].NetworkCard < out[j].NetworkCard
		}
		return out[i].DeviceIndex < out[j].DeviceIndex
	})
	return out, nil
}

func readENI(ctx context.Context, md IMDSAPI, mac string) (IMDSENI, bool, error) {
	base := "network/interfaces/macs/" + mac + "/"
	eni := IMDSENI{MAC: strings.ToLower(mac)}
	dev, err := get(ctx, md, base+"device-number")
	if errors.Is(err, ErrNotFound) {
		return eni, false, nil
	}
	if err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	}
	if eni.DeviceIndex, err = strconv.Atoi(dev); err != nil {
		return eni, false, fmt.Errorf("parsing device-number %q of ENI %s: %w", dev, mac, err)
	}
	eni.ID, err = get(ctx, md, base+"interface-id")
	if errors.Is(err, ErrNotFound) {
		return eni, false, nil
	}
	if err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	}
	// network-card exists only on instance types with several cards; absent means card 0.
	if card, err := getOptional(ctx, md, base+"network-card"); err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	} else if card != "" {
		if eni.NetworkCard, err = strconv.Atoi(card); err != nil {
			return eni, false, fmt.Errorf("parsing network-card %q of ENI %s: %w", card, mac, err)
		}
	}
	ips, err := getList(ctx, md, base+"local-ipv4s")
	if err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	}
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return eni, false, fmt.Errorf("parsing local-ipv4s of ENI %s: %w", mac, err)
		}
		eni.IPs = append(eni.IPs, ip)
	}
	prefixes, err := getList(ctx, md, base+"ipv4-prefix")
	if err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	}
	for _, s := range prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return eni, false, fmt.Errorf("parsing ipv4-prefix of ENI %s: %q is not an IPv4 prefix", mac, s)
		}
		eni.IPv4Prefixes = append(eni.IPv4Prefixes, p)
	}
	if eni.SubnetID, err = getOptional(ctx, md, base+"subnet-id"); err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	}
	cidr, err := getOptional(ctx, md, base+"subnet-ipv4-cidr-block")
	if err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	}
	if cidr != "" {
		if eni.SubnetCIDR, err = netip.ParsePrefix(cidr); err != nil {
			return eni, false, fmt.Errorf("parsing subnet-ipv4-cidr-block of ENI %s: %w", mac, err)
		}
	}
	if eni.IPv6, err = readIPv6(ctx, md, base); err != nil {
		return eni, false, fmt.Errorf("reading ENI %s: %w", mac, err)
	}
	return eni, true, nil
}
