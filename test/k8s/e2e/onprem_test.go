package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

// onPremTarget is the netexec pod on node 1 that the on-premises host reaches by its IP.
const onPremTarget = "onprem-target"

// onPremises: a client outside the VPC's CIDRs (the fabric's on-premises host, as over a VPN or a peering)
// opens TCP connections and sends UDP requests to a pod by its IP, with the node's SNAT on. The pod must see
// the client's own address and the client must get the pod's answers from the pod's address: the flow
// crosses the host both ways, or kube-proxy drops the SYN-ACK as INVALID (iptables mode) or the node
// translates the pod's later segments and its UDP replies.
func (s *suite) onPremises(t *testing.T) string {
	ctx := context.Background()
	ip := s.onPremTargetIP(t)
	client := s.c.Fabric.OnPremises()
	tcpOK, udpOK := 0, 0
	var errs []string
	for range tries {
		seen, err := get(ctx, client.NetnsPath, "http://"+net.JoinHostPort(ip, "8080")+"/clientip")
		if host, _, _ := net.SplitHostPort(seen); err == nil && host == client.IP.String() {
			tcpOK++
		} else {
			errs = append(errs, fmt.Sprintf("TCP: seen as %q, %v", seen, err))
		}
		if got, err := udpRequest(ctx, client.NetnsPath, net.JoinHostPort(ip, "8081"), "hostname"); err == nil && got == onPremTarget {
			udpOK++
		} else {
			errs = append(errs, fmt.Sprintf("UDP: answered %q, %v", got, err))
		}
	}
	if tcpOK != tries || udpOK != tries {
		t.Errorf("%s to pod %s: TCP %d/%d seen as itself, UDP %d/%d answered; %v; what the packets did:%s", client.IP, ip,
			tcpOK, tries, udpOK, tries, first(errs, 4), diagnose(ctx, s.node1, ip))
	}
	return fmt.Sprintf("%s to a pod: TCP %d/%d (seen as itself), UDP %d/%d", client.IP, tcpOK, tries, udpOK, tries)
}

// onPremTargetIP starts the target pod on node 1 the first time and returns its IP.
func (s *suite) onPremTargetIP(t *testing.T) string {
	ctx := context.Background()
	pods := s.c.Client.CoreV1().Pods(ns)
	if _, err := pods.Get(ctx, onPremTarget, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		mustCreate(t, onPremTarget, pods.Create, pod(onPremTarget, s.node1.Name, 0))
	}
	ready, err := waitPodsReady(ctx, s.c, ns, "app="+onPremTarget, 1, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return ready[0].Status.PodIP
}

// udpRequest sends request to addr over UDP from the network namespace at nsPath and returns the first
// answer, retrying a few times (the first datagram may wait on ARP).
func udpRequest(ctx context.Context, nsPath, addr, request string) (string, error) {
	c, err := vpcfabric.DialContext(nsPath)(ctx, "udp4", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 512)
	var last error
	for range 5 {
		if _, err := c.Write([]byte(request)); err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(buf)
		if err == nil {
			return strings.TrimSpace(string(buf[:n])), nil
		}
		last = err
	}
	return "", last
}
