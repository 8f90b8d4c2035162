package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/internal/clock"
)

// booksIPs returns every secondary IP the books hold, by ENI.
func booksIPs(st *journal.State) map[string]string {
	out := map[string]string{}
	for _, e := range st.ENIs {
		for _, ip := range e.IPs {
			out[ip] = e.ID
		}
	}
	return out
}

// freeIPOf returns an IP of the books' ENI eniID that no pod holds.
func freeIPOf(st *journal.State, eniID string) string {
	for _, e := range st.ENIs {
		if e.ID != eniID {
			continue
		}
		for _, ip := range e.IPs {
			if !slices.ContainsFunc(st.Assignments, func(a journal.Assignment) bool { return a.IP == ip }) {
				return ip
			}
		}
	}
	return ""
}

func primaryID(st *journal.State) string {
	for _, e := range st.ENIs {
		if e.Primary {
			return e.ID
		}
	}
	return ""
}

// TestIPsUnassignedOutsideEniwireLeaveTheBooks: someone unassigns IPs from our ENIs behind our back. A free
// one leaves the books (a pod must never get an address its ENI does not hold: EC2 may have given it to
// another node); one a pod holds stays with its pod, reported.
func TestIPsUnassignedOutsideEniwireLeaveTheBooks(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	r := w.start(fastConfig(w.dir), nil, nil)
	waitReady(t, r.node)
	held := assignRetrying(t, r.node, "pod-0")
	st := r.node.Snapshot()
	prim := primaryID(st)
	free := freeIPOf(st, prim)
	if free == "" || held.ENI != prim {
		t.Fatalf("want a pod and a free IP on the primary %s; pod on %s, free %q", prim, held.ENI, free)
	}
	outsider := w.ec2(nil)
	if _, err := outsider.UnassignPrivateIpAddresses(context.Background(), &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(prim), PrivateIpAddresses: []string{free, held.IP}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the free IP EC2 no longer lists leaves the books", func() error {
		if eni, ok := booksIPs(r.node.Snapshot())[free]; ok {
			return fmt.Errorf("%s still in the books on %s", free, eni)
		}
		return nil
	})
	st = r.node.Snapshot()
	if a := st.Assignment("pod-0", "eth0"); a == nil || a.IP != held.IP {
		t.Fatalf("the assignment of a pod whose IP EC2 took away changed: %+v", a)
	}
	for i := range 8 {
		a := assignRetrying(t, r.node, fmt.Sprintf("later-%d", i))
		if a.IP == free || a.IP == held.IP {
			t.Fatalf("pod later-%d got %s, which its ENI no longer holds", i, a.IP)
		}
	}
}

// laggingDescribe shows, for lag after each successful UnassignPrivateIpAddresses, the unassigned IPs still on
// their ENI in DescribeNetworkInterfaces answers: EC2's eventual consistency right after our own unassign.
type laggingDescribe struct {
	ec2client.EC2API
	clk clock.Clock
	lag time.Duration

	mu   sync.Mutex
	gone map[string]unassigned // by IP
}

type unassigned struct {
	eni string
	at  time.Time
}

func (l *laggingDescribe) UnassignPrivateIpAddresses(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput, o ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	out, err := l.EC2API.UnassignPrivateIpAddresses(ctx, in, o...)
	if err == nil {
		l.mu.Lock()
		for _, ip := range in.PrivateIpAddresses {
			l.gone[ip] = unassigned{eni: aws.ToString(in.NetworkInterfaceId), at: l.clk.Now()}
		}
		l.mu.Unlock()
	}
	return out, err
}

func (l *laggingDescribe) AssignPrivateIpAddresses(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput, o ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	out, err := l.EC2API.AssignPrivateIpAddresses(ctx, in, o...)
	if err == nil {
		l.mu.Lock()
		for _, a := range out.AssignedPrivateIpAddresses {
			delete(l.gone, aws.ToString(a.PrivateIpAddress))
		}
		l.mu.Unlock()
	}
	return out, err
}

func (l *laggingDescribe) DescribeNetworkInterfaces(ctx context.Context, in *ec2.DescribeNetworkInterfacesInput, o ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	out, err := l.EC2API.DescribeNetworkInterfaces(ctx, in, o...)
	if err != nil {
		return out, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	for i := range out.NetworkInterfaces {
		ni := &out.NetworkInterfaces[i]
		for ip, u := range l.gone {
			if u.eni == aws.ToString(ni.NetworkInterfaceId) && now.Sub(u.at) < l.lag {
				ni.PrivateIpAddresses = append(ni.PrivateIpAddresses, types.NetworkInterfacePrivateIpAddress{
					PrivateIpAddress: aws.String(ip), Primary: aws.Bool(false)})
			}
		}
	}
	return out, nil
}

// stale returns the IPs the node unassigned that are still in their lag window or younger than window.
func (l *laggingDescribe) unassignedWithin(window time.Duration) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for ip, u := range l.gone {
		if l.clk.Since(u.at) < window {
			out[ip] = u.eni
		}
	}
	return out
}

// TestOurOwnUnassignsAreNotResurrectedByALaggingDescribe: right after our UnassignPrivateIpAddresses a
// Describe may still list the IPs. The reconcile must not take them back as free IPs.
func TestOurOwnUnassignsAreNotResurrectedByALaggingDescribe(t *testing.T) {
	w := newWorld(t, "m5.large", 200)
	lag := 90 * time.Second
	api := &laggingDescribe{EC2API: w.ec2(nil), clk: w.clk, lag: lag, gone: map[string]unassigned{}}
	cfg := fastConfig(w.dir)
	cfg.WarmIPTarget = 2
	r := w.start(cfg, api, nil)
	waitReady(t, r.node)
	for i := range 6 {
		assignRetrying(t, r.node, fmt.Sprintf("pod-%d", i))
	}
	for i := range 6 {
		if _, err := r.node.Release(context.Background(), api0Release(fmt.Sprintf("pod-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the surplus given back", func() error {
		if len(api.unassignedWithin(time.Hour)) == 0 {
			return fmt.Errorf("no unassign yet")
		}
		return nil
	})
	w.passVirtual(2*lag, func() {
		books := booksIPs(r.node.Snapshot())
		for ip, eni := range api.unassignedWithin(2 * lag) {
			if books[ip] == eni {
				t.Fatalf("IP %s, unassigned from %s by the node, is back in the books after a lagging Describe", ip, eni)
			}
		}
	})
	_ = controller.Gateway
}

func api0Release(cid string) api.ReleaseRequest {
	return api.ReleaseRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}}
}
