package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

// get fetches url with a client whose connections start in the network namespace at nsPath, and returns
// the body.
func get(ctx context.Context, nsPath, rawURL string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", err
	}
	client := vpcfabric.HTTPClient(nsPath)
	client.Transport.(*http.Transport).DisableKeepAlives = true
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", rawURL, resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// fromVPCHost fetches http://dst/hostname from the VPC host: a client elsewhere in the VPC.
func fromVPCHost(ctx context.Context, c *cluster.Cluster, dst string) (string, error) {
	return get(ctx, c.Fabric.VPCHost().NetnsPath, "http://"+dst+"/hostname")
}

// vpcHostIP is the VPC host's address in the cluster's IP family.
func (s *suite) vpcHostIP() netip.Addr {
	if s.c.Family.IsIPv6() {
		return s.c.Fabric.VPCHost().IPv6
	}
	return s.c.Fabric.VPCHost().IP
}

// dialResult is what netexec's /dial answers: the responses of the tries that worked, the errors of the
// others.
type dialResult struct {
	Responses []string `json:"responses"`
	Errors    []string `json:"errors"`
}

// dialFrom asks the netexec pod at clientIP (on node) to dial host:port over protocol ("http" or "udp")
// tries times and request "hostname": the traffic starts inside the pod, as an application's would. The
// harness reaches the pod's /dial from its node.
func dialFrom(ctx context.Context, node *cluster.Node, clientIP, protocol, host string, port, tries int) (dialResult, error) {
	return dialRequest(ctx, node, clientIP, protocol, host, port, tries, "hostname")
}

// dialRequest is dialFrom with another request (the path an HTTP dial fetches, the payload of a UDP one).
func dialRequest(ctx context.Context, node *cluster.Node, clientIP, protocol, host string, port, tries int, request string) (dialResult, error) {
	q := url.Values{"request": {request}, "protocol": {protocol}, "host": {host}, "port": {fmt.Sprint(port)}, "tries": {fmt.Sprint(tries)}}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(tries)*6*time.Second+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(clientIP, "8080")+"/dial?"+q.Encode(), nil)
	if err != nil {
		return dialResult{}, err
	}
	client := node.Netns.HTTPClient()
	client.Transport.(*http.Transport).DisableKeepAlives = true
	resp, err := client.Do(req)
	if err != nil {
		return dialResult{}, fmt.Errorf("asking %s to dial: %w", clientIP, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r dialResult
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("asking %s to dial: %s: %s", clientIP, resp.Status, body)
	}
	return r, nil
}

// diagnose says what the packets did on the node: eniwire's datapath verdict counters (non-zero ones) and
// the kernel's conntrack entries that involve addr, so a failing case explains itself instead of timing out.
func diagnose(ctx context.Context, n *cluster.Node, addr string) string {
	var b strings.Builder
	if body, err := get(ctx, n.Netns.NetnsPath, "http://127.0.0.1:61678/metrics"); err == nil {
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "eniwire_datapath_packets_total") && !strings.HasSuffix(line, " 0") {
				fmt.Fprintf(&b, "\n    %s: %s", n.Name, line)
			}
		}
	} else {
		fmt.Fprintf(&b, "\n    %s: agent metrics: %v", n.Name, err)
	}
	family := "ipv4"
	if strings.Contains(addr, ":") {
		family = "ipv6"
	}
	for _, dir := range []string{"-s", "-d"} {
		out, _ := n.NS().Command(ctx, "conntrack", "-L", "-f", family, dir, addr).CombinedOutput()
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "" && !strings.Contains(line, "flow entries have been shown") {
				fmt.Fprintf(&b, "\n    %s conntrack: %s", n.Name, line)
			}
		}
	}
	return b.String()
}
