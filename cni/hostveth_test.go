package cni_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/eniwire/eniwire/test/cnitest"
)

// TestTheNodeLearnsNoIPv6RoutesFromAPod: the host veth ADD creates takes no Router Advertisement and no
// Redirect from the pod, so a pod cannot give the node an IPv6 route through itself (the CVE-2020-10749
// class), whatever passes the datapath's filter.
func TestTheNodeLearnsNoIPv6RoutesFromAPod(t *testing.T) {
	h := newHarness(t)
	pod := cnitest.NewNS(t)
	out, err := h.run(add, podArgs("ra", pod, h.conf("1.1.0", nil)))
	if err != nil {
		t.Fatalf("ADD: %v\nlog: %s", err, h.log.String())
	}
	res, err := current.NewResult(out)
	if err != nil {
		t.Fatal(err)
	}
	hostVeth := res.(*current.Result).Interfaces[0].Name
	for _, key := range []string{"accept_ra", "accept_redirects"} {
		var got []byte
		if err := h.node.Do(func(ns.NetNS) (err error) {
			got, err = os.ReadFile(filepath.Join("/proc/sys/net/ipv6/conf", hostVeth, key))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if v := strings.TrimSpace(string(got)); v != "0" {
			t.Errorf("net.ipv6.conf.%s.%s = %s, want 0", hostVeth, key, v)
		}
	}
}
