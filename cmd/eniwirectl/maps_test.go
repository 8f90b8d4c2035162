package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/rlimit"

	"github.com/eniwire/eniwire/datapath"
	"github.com/eniwire/eniwire/internal/testenv"
)

func TestMapsDecodesThePinnedMapsWithoutTheAgent(t *testing.T) {
	testenv.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("/sys/fs/bpf/eniwirectl-test-%d", os.Getpid())
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	pinRoot := filepath.Join(base, "v1")
	d, err := datapath.Open(datapath.Config{PinRoot: pinRoot, VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}})
	if err != nil {
		t.Fatalf("opening the datapath: %v", err)
	}
	t.Cleanup(func() { _ = d.Close(); _ = datapath.Uninstall(pinRoot) })
	if err := d.PutPod(netip.MustParseAddr("10.0.0.42"), 4242, 7); err != nil {
		t.Fatalf("PutPod: %v", err)
	}

	for _, tc := range []struct {
		name, output string
		want         []string
	}{
		{"a table lists the pod, its veth and ENI ifindexes and the VPC route", "table", []string{"10.0.0.42", "4242", "10.0.0.0/16", "vpc", "from_pod"}},
		{"JSON carries the same entries", "json", []string{`"IP": "10.0.0.42"`, `"HostIfindex": 4242`, `"ENIIfindex": 7`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run([]string{"maps", "--pin-root", pinRoot, "--output", tc.output}, &out); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Fatalf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tc.output == "json" && !json.Valid(out.Bytes()) {
				t.Fatal("invalid JSON")
			}
		})
	}
}

func TestCommandsSayWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"status with the agent down names the socket and what still works", []string{"status", "--socket", filepath.Join(dir, "none.sock")}, "eniwirectl journal"},
		{"pods with the agent down says the agent does not answer", []string{"pods", "--socket", filepath.Join(dir, "none.sock")}, "does not answer"},
		{"maps without pins names the pin root", []string{"maps", "--pin-root", filepath.Join(dir, "nopins")}, "no eniwire maps pinned under"},
		{"an unknown command is refused", []string{"frobnicate"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
