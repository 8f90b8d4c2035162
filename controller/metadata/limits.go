package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller/ec2client"
)

// Limits are the instance type's network limits.
type Limits struct {
	MaxENIs      int    `json:"maxENIs"`      // ENIs on the default network card, the primary included
	IPv4PerENI   int    `json:"ipv4PerENI"`   // private IPv4 addresses per ENI, the primary included
	NetworkCards int    `json:"networkCards"` // network cards of the type (1 on most)
	VCPUs        int    `json:"vcpus"`        // default vCPUs (the max-pods ceiling depends on them)
	Hypervisor   string `json:"hypervisor"`   // "nitro" or "xen"; only Nitro types take /28 prefixes
}

// Nitro says whether the type is built on the Nitro System, which IPv4 prefixes need.
func (l Limits) Nitro() bool { return l.Hypervisor == "nitro" }

// LimitsFile is the name of the cache file under the cache directory.
const LimitsFile = "instance-type-limits.json"

// limitsCacheVersion grows when Limits gains a field, so that older files are asked for again.
const limitsCacheVersion = 2

type limitsCache struct {
	Version      int    `json:"version"`
	InstanceType string `json:"instanceType"`
	Limits       Limits `json:"limits"`
}

// LoadLimits returns the limits of instanceType as Load does: from the cache file in dir when it holds that
// type, else from DescribeInstanceTypes, then cached there (dir "": no cache).
func LoadLimits(ctx context.Context, api ec2client.EC2API, instanceType, dir string) (Limits, error) {
	return loadLimits(ctx, api, instanceType, dir)
}

// CachedLimits returns the instance type and limits the cache file in dir holds, without asking EC2.
func CachedLimits(dir string) (string, Limits, bool) {
	c, ok := readLimitsFile(filepath.Join(dir, LimitsFile))
	return c.InstanceType, c.Limits, ok
}

// loadLimits returns the limits of instanceType from the cache in dir when it holds that type, else from
// DescribeInstanceTypes, and then caches them. An instance's type never changes while it runs, and stopping it
// to change the type changes the file's key, so the cache never goes stale. dir "" means no cache.
func loadLimits(ctx context.Context, api ec2client.EC2API, instanceType, dir string) (Limits, error) {
	path := filepath.Join(dir, LimitsFile)
	if dir != "" {
		if l, ok := readLimitsCache(path, instanceType); ok {
			return l, nil
		}
	}
	out, err := api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(instanceType)}})
	if err != nil {
		return Limits{}, fmt.Errorf("describing instance type %s: %w", instanceType, err)
	}
	if len(out.InstanceTypes) == 0 || out.InstanceTypes[0].NetworkInfo == nil {
		return Limits{}, fmt.Errorf("describing instance type %s: EC2 returned no network information", instanceType)
	}
	l := limitsOf(out.InstanceTypes[0])
	if l.MaxENIs < 1 || l.IPv4PerENI < 1 {
		return Limits{}, fmt.Errorf("describing instance type %s: implausible limits %+v", instanceType, l)
	}
	if dir != "" {
		if err := writeLimitsCache(path, limitsCache{Version: limitsCacheVersion, InstanceType: instanceType, Limits: l}); err != nil {
			return Limits{}, err
		}
	}
	return l, nil
}

func limitsOf(it types.InstanceTypeInfo) Limits {
	ni := it.NetworkInfo
	l := Limits{
		MaxENIs:      int(aws.ToInt32(ni.MaximumNetworkInterfaces)),
		IPv4PerENI:   int(aws.ToInt32(ni.Ipv4AddressesPerInterface)),
		NetworkCards: max(int(aws.ToInt32(ni.MaximumNetworkCards)), 1),
		Hypervisor:   string(it.Hypervisor),
	}
	if it.VCpuInfo != nil {
		l.VCPUs = int(aws.ToInt32(it.VCpuInfo.DefaultVCpus))
	}
	// On multi-card types MaximumNetworkInterfaces is the total over all cards; the controller manages the
	// default card, whose own maximum is listed per card.
	defaultCard := aws.ToInt32(ni.DefaultNetworkCardIndex)
	for _, card := range ni.NetworkCards {
		if aws.ToInt32(card.NetworkCardIndex) == defaultCard && card.MaximumNetworkInterfaces != nil {
			l.MaxENIs = int(*card.MaximumNetworkInterfaces)
		}
	}
	return l
}

func readLimitsCache(path, instanceType string) (Limits, bool) {
	c, ok := readLimitsFile(path)
	if !ok || c.InstanceType != instanceType {
		return Limits{}, false
	}
	return c.Limits, true
}

// readLimitsFile reads the cache file. A missing, corrupt or older file is no error: EC2 is asked again and
// the file rewritten.
func readLimitsFile(path string) (limitsCache, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return limitsCache{}, false
	}
	var c limitsCache
	if json.Unmarshal(b, &c) != nil || c.Version != limitsCacheVersion || c.InstanceType == "" ||
		c.Limits.MaxENIs < 1 || c.Limits.IPv4PerENI < 1 {
		return limitsCache{}, false
	}
	return c, true
}

// writeLimitsCache writes the file atomically: a temporary file in the same directory, synced, renamed over
// the old one, and the directory synced, so a crash leaves either the old file or the new one.
func writeLimitsCache(path string, c limitsCache) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the cache directory: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the limits cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, LimitsFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing the limits cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the limits cache: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing the limits cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the limits cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing the limits cache: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing the cache directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("syncing the cache directory: %w", err)
	}
	return nil
}
