package hostroute

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/datapath/dptypes"
)

// addVeth makes a veth pair name <-> "p"+name (outside the prefix, as a pod end would be) in h's namespace and returns the first end.
func addVeth(t *testing.T, h *netlink.Handle, name string) Veth {
	t.Helper()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "p" + name}); err != nil {
		t.Fatalf("adding veth %s: %v", name, err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	return Veth{Name: name, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr}
}

// linkIndex is the index of name in h's namespace, 0 when there is no such link.
func linkIndex(t *testing.T, h *netlink.Handle, name string) int {
	t.Helper()
	l, err := h.LinkByName(name)
	if isLinkNotFound(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}

// runReaper runs r until the test ends.
func runReaper(t *testing.T, r *Reaper) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitFor polls cond until it holds or 5 s passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removedLog records the indexes Reaper.Removed is told about.
type removedLog struct {
	mu  sync.Mutex
	idx []int
}

func (l *removedLog) add(i int) { l.mu.Lock(); l.idx = append(l.idx, i); l.mu.Unlock() }
func (l *removedLog) has(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.idx, i)
}

func TestReleasedVethIsRemovedInTheBackground(t *testing.T) {
	h := newNamespace(t)
	var gone removedLog
	r := NewReaper(ReaperConfig{Handle: h, Removed: gone.add})
	runReaper(t, r)
	routes := &Routes{Handle: h, Veths: r}
	if !routes.RemovesHostVeth() {
		t.Fatal("Routes with a Reaper says it leaves the veth to the plugin")
	}

	t.Run("PodDown removes the route at once and the veth soon after", func(t *testing.T) {
		v := addVeth(t, h, "eniwtest0")
		pod := dptypes.Pod{IP: netip.MustParseAddr("10.9.1.7"), HostVeth: v.Name, HostIfindex: v.Index}
		if err := routes.PodUp(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		if err := routes.PodDown(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		rs, err := h.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range rs {
			if rt.Dst != nil && rt.Dst.IP.String() == pod.IP.String() {
				t.Fatalf("route %v still there after PodDown returned", rt)
			}
		}
		waitFor(t, "veth removed", func() bool { return linkIndex(t, h, v.Name) == 0 })
		waitFor(t, "Removed told", func() bool { return gone.has(v.Index) })
		if linkIndex(t, h, "p"+v.Name) != 0 {
			t.Error("the peer outlived its veth")
		}
	})

	t.Run("a newer veth of the same name survives the release of the old one", func(t *testing.T) {
		old := addVeth(t, h, "eniwtest1")
		if err := h.LinkDel(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: old.Index}}); err != nil {
			t.Fatal(err)
		}
		newer := addVeth(t, h, "eniwtest1")
		r.Release(old)
		// A later release is handled after the first: once it is done, the first one was decided.
		marker := addVeth(t, h, "eniwtest2")
		r.Release(marker)
		waitFor(t, "marker removed", func() bool { return linkIndex(t, h, marker.Name) == 0 })
		if got := linkIndex(t, h, newer.Name); got != newer.Index {
			t.Fatalf("%s has index %d, want the newer veth's %d", newer.Name, got, newer.Index)
		}
	})
}

func TestKeepCancelsAQueuedRelease(t *testing.T) {
	h := newNamespace(t)
	r := NewReaper(ReaperConfig{Handle: h})
	v := addVeth(t, h, "eniwkeep0")
	r.Release(v) // queued; Run is not running yet
	if err := r.Keep(v); err != nil {
		t.Fatalf("Keep of a queued veth: %v", err)
	}
	runReaper(t, r)
	marker := addVeth(t, h, "eniwkeep1")
	r.Release(marker)
	waitFor(t, "marker removed", func() bool { return linkIndex(t, h, marker.Name) == 0 })
	if linkIndex(t, h, v.Name) != v.Index {
		t.Fatal("a veth kept after its release was removed")
	}
}

func TestKeepFailsOnceTheRemovalStarted(t *testing.T) {
	r := NewReaper(ReaperConfig{})
	r.mu.Lock()
	r.removing[42] = true
	r.mu.Unlock()
	if err := r.Keep(Veth{Name: "eniwgoing", Index: 42}); !errors.Is(err, ErrVethRemoving) {
		t.Fatalf("Keep during removal = %v, want ErrVethRemoving", err)
	}
}

func TestSweepRemovesOnlyVethsUnclaimedForTheGrace(t *testing.T) {
	h := newNamespace(t)
	ctx := context.Background()
	claimed := addVeth(t, h, "eniwclaim0")
	unclaimed := addVeth(t, h, "eniwstale0")
	other := addVeth(t, h, "othr0") // not ours: the prefix does not match

	t.Run("a veth within its grace stays", func(t *testing.T) {
		r := NewReaper(ReaperConfig{Handle: h, Grace: time.Hour})
		if err := r.Keep(claimed); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if n, err := r.Sweep(ctx); err != nil || n != 0 {
				t.Fatalf("Sweep = %d, %v; want nothing removed", n, err)
			}
		}
		if linkIndex(t, h, unclaimed.Name) == 0 {
			t.Fatal("an unclaimed veth within its grace was removed")
		}
	})

	t.Run("after the grace an unclaimed veth goes and claimed ones stay", func(t *testing.T) {
		const grace = 50 * time.Millisecond
		r := NewReaper(ReaperConfig{Handle: h, Grace: grace})
		if err := r.Keep(claimed); err != nil {
			t.Fatal(err)
		}
		// The first sweep starts the grace; none is removed before it has passed.
		if n, err := r.Sweep(ctx); err != nil || n != 0 {
			t.Fatalf("first Sweep = %d, %v; want nothing removed", n, err)
		}
		start := time.Now()
		var removed int
		waitFor(t, "the stale veth swept", func() bool {
			n, err := r.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			removed += n
			return removed > 0
		})
		if elapsed := time.Since(start); elapsed < grace {
			t.Errorf("swept after %v, before the %v grace", elapsed, grace)
		}
		if removed != 1 || linkIndex(t, h, unclaimed.Name) != 0 {
			t.Fatalf("removed %d; %s index %d, want it alone gone", removed, unclaimed.Name, linkIndex(t, h, unclaimed.Name))
		}
		if linkIndex(t, h, claimed.Name) != claimed.Index || linkIndex(t, h, other.Name) != other.Index {
			t.Fatal("the sweep removed a claimed veth or one without the prefix")
		}
	})

	t.Run("a restarted agent sweeps what its predecessor released but had not removed", func(t *testing.T) {
		leftover := addVeth(t, h, "eniwleft0")
		// A new Reaper knows nothing; the agent's replay claims the live pods before the grace ends.
		r := NewReaper(ReaperConfig{Handle: h, Grace: time.Nanosecond})
		if err := r.Keep(claimed); err != nil {
			t.Fatal(err)
		}
		// The first sweep starts the (here 1 ns) grace, the second acts.
		removed := 0
		for range 2 {
			n, err := r.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			removed += n
		}
		if removed != 1 {
			t.Fatalf("two sweeps removed %d, want the leftover alone", removed)
		}
		if linkIndex(t, h, leftover.Name) != 0 || linkIndex(t, h, claimed.Name) != claimed.Index {
			t.Fatal("the sweep after a restart removed the wrong veth")
		}
	})
}
