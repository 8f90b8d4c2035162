package datapath

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/bpf"
	"github.com/eniwire/eniwire/internal/testenv"
)

func TestBpftoolDumpsPinnedMapsReadably(t *testing.T) {
	bpftool := testenv.RequireTool(t, "bpftool")
	d := openTest(t, testConfig(true))
	putTestState(t, d)

	dump := func(t *testing.T, name string, into any) {
		t.Helper()
		out, err := exec.Command(bpftool, "-j", "map", "dump", "pinned", filepath.Join(d.cfg.PinRoot, mapsDir, name)).Output()
		if err != nil {
			t.Fatalf("bpftool map dump %s: %v", name, err)
		}
		if err := json.Unmarshal(out, into); err != nil {
			t.Fatalf("decoding bpftool JSON for %s: %v\n%s", name, err, out)
		}
	}

	t.Run("pods show the address and both ifindexes by field name", func(t *testing.T) {
		var entries []struct {
			Formatted struct {
				Key struct {
					Addr []byte `json:"addr"`
				} `json:"key"`
				Value struct {
					HostIfindex *int `json:"host_ifindex"`
					ENIIfindex  *int `json:"eni_ifindex"`
				} `json:"value"`
			} `json:"formatted"`
		}
		dump(t, "pods", &entries)
		got := map[netip.Addr][2]int{}
		for _, e := range entries {
			a, ok := netip.AddrFromSlice(e.Formatted.Key.Addr)
			if !ok || e.Formatted.Value.HostIfindex == nil || e.Formatted.Value.ENIIfindex == nil {
				t.Fatalf("entry without BTF-formatted fields: %+v", e)
			}
			got[a.Unmap()] = [2]int{*e.Formatted.Value.HostIfindex, *e.Formatted.Value.ENIIfindex}
		}
		want := map[netip.Addr][2]int{
			addr("10.0.1.21"): {vethPod1, eniA},
			addr("10.0.2.22"): {vethPod2, eniB},
			addr("10.0.3.23"): {vethPodNoEN, 99},
			addr("10.0.1.24"): {vethGone, eniA},
		}
		if len(got) != len(want) {
			t.Fatalf("bpftool shows %d pods, want %d: %v", len(got), len(want), got)
		}
		for a, w := range want {
			if got[a] != w {
				t.Errorf("pod %s = %v, want %v", a, got[a], w)
			}
		}
	})

	t.Run("routes show the route kind by name", func(t *testing.T) {
		var entries []struct {
			Formatted struct {
				Key struct {
					Prefixlen int `json:"prefixlen"`
				} `json:"key"`
				Value struct {
					Kind string `json:"kind"`
				} `json:"value"`
			} `json:"formatted"`
		}
		dump(t, "routes", &entries)
		var kinds []string
		for _, e := range entries {
			kinds = append(kinds, e.Formatted.Value.Kind)
		}
		slices.Sort(kinds)
		// testConfig's node IP and host CIDR, 169.254.0.0/16, fe80::/10 and ff00::/8; its VPC CIDR.
		if want := []string{"ROUTE_HOST", "ROUTE_HOST", "ROUTE_HOST", "ROUTE_HOST", "ROUTE_HOST", "ROUTE_VPC"}; !slices.Equal(kinds, want) {
			t.Errorf("route kinds = %v, want %v", kinds, want)
		}
	})

	t.Run("ENIs show gateway and MAC by field name", func(t *testing.T) {
		var entries []struct {
			Formatted struct {
				Key   int `json:"key"`
				Value struct {
					Gateway struct {
						Addr []byte `json:"addr"`
					} `json:"gateway"`
					MAC []byte `json:"mac"`
				} `json:"value"`
			} `json:"formatted"`
		}
		dump(t, "enis", &entries)
		for _, e := range entries {
			gw, _ := netip.AddrFromSlice(e.Formatted.Value.Gateway.Addr)
			if e.Formatted.Key == eniB && gw.Unmap() != addr("10.0.2.1") {
				t.Errorf("ENI %d gateway = %s, want 10.0.2.1", eniB, gw)
			}
			if len(e.Formatted.Value.MAC) != 6 {
				t.Errorf("ENI %d MAC = %v, want 6 bytes", e.Formatted.Key, e.Formatted.Value.MAC)
			}
		}
	})
}

func TestReopeningPinsKeepsEntries(t *testing.T) {
	root := testPinRoot(t)
	cfg := testConfig(true)
	cfg.PinRoot = root
	d := openTest(t, cfg)
	if err := d.PutPod(addr("10.0.1.21"), 51, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	cfg.VPCCIDRs = []netip.Prefix{prefix("10.1.0.0/16")}
	d2 := openTest(t, cfg)
	pods, err := d2.Pods()
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0] != (Pod{IP: addr("10.0.1.21"), HostIfindex: 51, ENIIfindex: 1}) {
		t.Errorf("pods after reopening = %+v, want the one written before", pods)
	}
	routes, err := d2.Routes()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(routes, Route{Prefix: prefix("10.1.0.0/16"), Kind: RouteVPC}) || slices.Contains(routes, Route{Prefix: prefix("10.0.0.0/16"), Kind: RouteVPC}) {
		t.Errorf("routes after reopening with a new VPC CIDR = %v, want 10.1.0.0/16 only as VPC", routes)
	}

	r, err := OpenPinnedReadOnly(root)
	if err != nil {
		t.Fatalf("OpenPinnedReadOnly: %v", err)
	}
	defer r.Close()
	ro, err := r.Pods()
	if err != nil || len(ro) != 1 {
		t.Errorf("read-only pods = %v, %v; want the one entry", ro, err)
	}
	if _, err := r.Counters(); err != nil {
		t.Errorf("read-only counters: %v", err)
	}
	if err := r.pods.Put(ro[0].IP.As16(), make([]byte, 16)); err == nil {
		t.Errorf("writing through a read-only reader succeeded")
	}
}

func TestIncompatiblePinnedMapNeedsExplicitMigration(t *testing.T) {
	root := testPinRoot(t)
	// A pods map from a hypothetical older layout: 8-byte values.
	if err := os.MkdirAll(filepath.Join(root, mapsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := ebpf.NewMapWithOptions(&ebpf.MapSpec{
		Name: "pods", Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: 16, Pinning: ebpf.PinByName,
	}, ebpf.MapOptions{PinPath: filepath.Join(root, mapsDir)})
	if err != nil {
		t.Fatalf("pinning an old-layout map: %v", err)
	}
	old.Close()
	t.Cleanup(func() { _ = Uninstall(root) })

	t.Run("without MigrateMaps Open names the map", func(t *testing.T) {
		cfg := testConfig(true)
		cfg.PinRoot = root
		_, err := Open(cfg)
		var mie *MapIncompatibleError
		if !errors.Is(err, ErrMapIncompatible) || !errors.As(err, &mie) || mie.Map != "pods" {
			t.Fatalf("Open error = %v, want a *MapIncompatibleError for pods", err)
		}
	})
	t.Run("with MigrateMaps Open replaces it", func(t *testing.T) {
		cfg := testConfig(true)
		cfg.PinRoot = root
		cfg.MigrateMaps = true
		d := openTest(t, cfg)
		if err := d.PutPod(addr("10.0.1.21"), 51, 1); err != nil {
			t.Errorf("PutPod on the migrated map: %v", err)
		}
	})
}

// pinOldMap pins, under root, the pods map an older agent might have left: the current spec changed by
// change.
func pinOldMap(t *testing.T, root string, change func(*ebpf.MapSpec)) *ebpf.Map {
	t.Helper()
	spec, err := bpf.LoadEniwire()
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps[bpf.EniwireMapPods].Copy()
	ms.Pinning = ebpf.PinByName
	change(ms)
	if err := os.MkdirAll(filepath.Join(root, mapsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMapWithOptions(ms, ebpf.MapOptions{PinPath: filepath.Join(root, mapsDir)})
	if err != nil {
		t.Fatalf("pinning an older pods map: %v", err)
	}
	t.Cleanup(func() { m.Close(); _ = Uninstall(root) })
	return m
}

func TestPinnedMapLayoutIsJudgedByBTF(t *testing.T) {
	root := testPinRoot(t)
	// Same sizes, same type, same flags: only the BTF says the two ifindexes swapped places.
	pinOldMap(t, root, func(ms *ebpf.MapSpec) {
		u32 := &btf.Int{Name: "__u32", Size: 4}
		ms.Value = &btf.Struct{Name: "pod_value", Size: 16, Members: []btf.Member{
			{Name: "eni_ifindex", Type: u32, Offset: 0},
			{Name: "host_ifindex", Type: u32, Offset: 32},
			{Name: "flags", Type: u32, Offset: 64},
			{Name: "pad", Type: u32, Offset: 96},
		}}
	})
	cfg := testConfig(true)
	cfg.PinRoot = root
	_, err := Open(cfg)
	var mie *MapIncompatibleError
	if !errors.As(err, &mie) || mie.Map != "pods" || !errors.Is(err, errLayoutChanged) {
		t.Fatalf("Open error = %v, want a *MapIncompatibleError for pods saying its layout changed", err)
	}
}

func TestResizedPinnedMapKeepsItsEntries(t *testing.T) {
	root := testPinRoot(t)
	old := pinOldMap(t, root, func(ms *ebpf.MapSpec) { ms.MaxEntries = 1024 })
	k, _ := addrKey(addr("10.0.1.21"))
	if err := old.Put(k, bpf.EniwirePodValue{HostIfindex: 51, EniIfindex: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(true)
	cfg.PinRoot = root
	cfg.MigrateMaps = true
	d := openTest(t, cfg)
	pods, err := d.Pods()
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0] != (Pod{IP: addr("10.0.1.21"), HostIfindex: 51, ENIIfindex: 1}) {
		t.Errorf("pods after the resize = %+v, want the entry the old map held", pods)
	}
	if info, err := d.objs.Pods.Info(); err != nil || info.MaxEntries == 1024 {
		t.Errorf("pods map max entries = %d (err %v), want the new size", info.MaxEntries, err)
	}
}

func TestCollectorExportsCounters(t *testing.T) {
	d := openTest(t, testConfig(true))
	putTestState(t, d)
	spoof := frame(addr("10.0.1.99"), addr("10.0.9.9"), protoUDP, 1, 2)
	for range 3 {
		if _, err := d.objs.EniwFromPod.Run(&ebpf.RunOptions{Data: spoof}); err != nil {
			t.Fatal(err)
		}
	}
	// A pod's own packet must arrive on its veth (vethPod1) to get past the anti-spoofing check.
	if _, err := runOn(runNS(t, vethPod1), d.objs.EniwFromPod, vethPod1, frame(addr("10.0.1.21"), addr("10.0.9.9"), protoUDP, 1, 2)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(d)); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"eniwire_datapath_packets_total,program=from_pod,verdict=dropped_spoof": 3,
		"eniwire_datapath_packets_total,program=from_pod,verdict=out_eni":       1,
		"eniwire_pod_packets_total,direction=tx,pod_ip=10.0.1.21":               1,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
}
