package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// coreDNSManifest is manifests/coredns.yaml for a cluster of family f: its Service takes f's DNS address
// (the manifest names the IPv4 one, which kubelets of an IPv4 cluster are given).
func coreDNSManifest(manifest []byte, f Family) ([]byte, error) {
	ipv4 := []byte("clusterIP: " + DNSServiceIP + "\n")
	if bytes.Count(manifest, ipv4) != 1 {
		return nil, fmt.Errorf("the CoreDNS manifest should set %q once", bytes.TrimSpace(ipv4))
	}
	return bytes.Replace(manifest, ipv4, []byte("clusterIP: "+f.DNSServiceIP+"\n"), 1), nil
}

// deployCoreDNS applies the CoreDNS manifest with the cluster's DNS Service address.
func (c *Cluster) deployCoreDNS(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(c.RepoRoot, "test", "k8s", "manifests", "coredns.yaml"))
	if err != nil {
		return err
	}
	if b, err = coreDNSManifest(b, c.Family); err != nil {
		return err
	}
	path := filepath.Join(c.Dir, "coredns.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "-f", path); err != nil {
		return fmt.Errorf("deploying CoreDNS: %w: %s", err, out)
	}
	return nil
}
