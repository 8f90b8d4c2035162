// Package cnitest holds what the CNI plugin's tests share: the real agent (cmd/eniwire-agent) started against
// an in-process test/ec2sim (agent.go), a hand-written agent double that serves the controller/api protocol
// from an in-memory pool, and helpers that make node and pod network namespaces. Its _test files drive the
// built plugin through libcni and cnitool; test/cri drives it through containerd's CRI.
package cnitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
	"github.com/eniwire/eniwire/datapath/hostroute"
	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// AgentDouble answers the agent API from a fixed list of IPs, stateful like the real agent: an assignment is
// kept per attachment, a repeated Assign returns it, and an empty pool answers CodeNoIPAvailable. Like the
// agent's hostroute datapath (it runs the same datapath/hostroute code) it adds the host route podIP/32 dev
// <host veth> in the node's namespace.
//
// Like the agent, it owns the host veths when it has a node: its Release answers HostVethRemovalAgent and a
// hostroute.Reaper removes the veth in the background.
//
// Tests use it only for what the real agent cannot do on cue: a pool that is exactly empty (STATUS, GC), an
// agent that is not ready, has a broken journal or datapath, or answers an unusable IP once (cni's in-process
// tests), and the benchmark's measure of the plugin alone. Everything else runs against StartAgent.
type AgentDouble struct {
	Socket string

	mu       sync.Mutex
	free     []string
	all      []string // the IPs as given, which fix IPv6 ones' egress addresses
	assigned map[api.Attachment]*api.Assignment
	ready    bool
	reason   string
	journal  string // Status.Journal; "" as from an agent that predates it
	datapath string // Status.Datapath; likewise
	badIP    bool
	vethGone bool // the next Assign finds the host veth it names removed, as after the agent's removal ran
	mtu      int
	calls    map[string]int
	unused   int // Release requests with Unused
	routes   *hostroute.Routes
	veths    *hostroute.Reaper

	vethMu    sync.Mutex
	stopVeths func()
}

// runVethRemoval starts the double's background removal of released veths; d.vethMu is held or unneeded.
func (d *AgentDouble) runVethRemoval() {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = d.veths.Run(ctx); close(stopped) }()
	d.stopVeths = func() { cancel(); <-stopped }
}

// HoldVethRemoval stops the double's background veth removal until resume is called: released veths queue up
// meanwhile, as they do while a busy agent has not got to them.
func (d *AgentDouble) HoldVethRemoval() (resume func()) {
	d.vethMu.Lock()
	defer d.vethMu.Unlock()
	if d.veths == nil {
		return func() {}
	}
	d.stopVeths()
	d.stopVeths = func() {}
	return func() {
		d.vethMu.Lock()
		defer d.vethMu.Unlock()
		d.runVethRemoval()
	}
}

// StartAgentDouble serves on a socket in a temp dir until the test ends. node is where host routes go (nil:
// no routes).
func StartAgentDouble(t testing.TB, node ns.NetNS, ips []string) *AgentDouble {
	t.Helper()
	dir, err := os.MkdirTemp("", "eniwire-agent-")
	if err != nil {
		t.Fatalf("making socket dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d := &AgentDouble{
		Socket:   dir + "/agent.sock",
		free:     slices.Clone(ips),
		all:      slices.Clone(ips),
		assigned: map[api.Attachment]*api.Assignment{},
		ready:    true,
		mtu:      DefaultMTU,
		calls:    map[string]int{},
	}
	if node != nil {
		h, err := netlink.NewHandleAt(netns.NsHandle(node.Fd()))
		if err != nil {
			t.Fatalf("opening netlink in the node namespace: %v", err)
		}
		// A handle of its own: a handle's socket serves one request at a time, and a veth's deletion takes
		// tens of milliseconds that the double's route requests must not wait behind.
		rh, err := netlink.NewHandleAt(netns.NsHandle(node.Fd()))
		if err != nil {
			t.Fatalf("opening netlink in the node namespace: %v", err)
		}
		d.veths = hostroute.NewReaper(hostroute.ReaperConfig{Handle: rh})
		d.routes = &hostroute.Routes{Handle: h, Veths: d.veths}
		d.runVethRemoval()
		t.Cleanup(func() {
			d.vethMu.Lock()
			d.stopVeths()
			d.vethMu.Unlock()
			rh.Close()
			h.Close()
		})
	}
	l, err := net.Listen("unix", d.Socket)
	if err != nil {
		t.Fatalf("listening on %s: %v", d.Socket, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathAssign, handle(d, d.assign))
	mux.HandleFunc("POST "+api.PathRelease, handle(d, d.release))
	mux.HandleFunc("POST "+api.PathCheck, handle(d, d.check))
	mux.HandleFunc("POST "+api.PathGC, handle(d, d.gc))
	mux.HandleFunc("GET "+api.PathStatus, handle(d, func(struct{}) (any, error) { return d.status(), nil }))
	mux.HandleFunc("GET "+api.PathAssignments, handle(d, func(struct{}) (any, error) { return d.Assignments(), nil }))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return d
}

// SetReady makes Status (and Assign) answer not ready with reason while ready is false.
func (d *AgentDouble) SetReady(ready bool, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ready, d.reason = ready, reason
}

// SetHealth makes Status answer journal and datapath as Status.Journal and Status.Datapath (api.Healthy, a
// failure, or "" as an agent that predates them).
func (d *AgentDouble) SetHealth(journal, datapath string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.journal, d.datapath = journal, datapath
}

// DefaultMTU is the MTU the double's answers carry until SetMTU: the agent's default (AWS_VPC_ENI_MTU).
const DefaultMTU = 9001

// SetMTU makes later assignments carry mtu, as an agent with AWS_VPC_ENI_MTU=mtu answers.
func (d *AgentDouble) SetMTU(mtu int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mtu = mtu
}

// RemoveVethBeforeNextAssign makes the next Assign delete the host veth it names before it claims it: the
// agent's removal of a released sandbox's pair ran between the plugin's finding the pair and its Assign.
func (d *AgentDouble) RemoveVethBeforeNextAssign() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.vethGone = true
}

// AnswerBadIPOnce makes the next Assign record an assignment whose IP the plugin cannot use, so the plugin
// fails after the agent assigned.
func (d *AgentDouble) AnswerBadIPOnce() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.badIP = true
}

// Assignments lists what the double holds, in no particular order.
func (d *AgentDouble) Assignments() []api.Assignment {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]api.Assignment, 0, len(d.assigned))
	for _, a := range d.assigned {
		out = append(out, *a)
	}
	return out
}

// Calls is how often the endpoint path was called.
func (d *AgentDouble) Calls(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[path]
}

// UnusedReleases is how many Release requests said the IP was never used (ReleaseRequest.Unused).
func (d *AgentDouble) UnusedReleases() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unused
}

// Free is how many IPs the double can still hand out.
func (d *AgentDouble) Free() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.free)
}

func (d *AgentDouble) assign(req api.AssignRequest) (any, error) {
	if req.ContainerID == "" || req.IfName == "" || req.HostIfindex == 0 {
		return nil, &api.Error{Code: api.CodeBadRequest, Message: "containerID, ifName and hostIfindex are required"}
	}
	if !d.ready {
		return nil, &api.Error{Code: api.CodeNotReady, Message: d.reason, Retryable: true}
	}
	if a, ok := d.assigned[req.Attachment]; ok {
		return a, nil
	}
	if len(d.free) == 0 {
		return nil, &api.Error{Code: api.CodeNoIPAvailable, Message: "pool empty", Retryable: true}
	}
	// An entry "IPv4,IPv6" is a dual-stack pod's pair, as the agent's dual-stack mode answers.
	entry := d.free[0]
	d.free = d.free[1:]
	ip, ipv6, _ := strings.Cut(entry, ",")
	a := &api.Assignment{
		Attachment: req.Attachment, Network: req.Network, Netns: req.Netns, Pod: req.Pod, HostVeth: req.HostVeth,
		HostIfindex: req.HostIfindex, IP: ip, ENI: "eni-double", ENIMAC: "02:00:00:00:00:01", DeviceIndex: 1,
		SubnetCIDR: "10.213.0.0/16", Gateway: "10.213.0.1", AssignedAt: time.Now(), MTU: d.mtu, IPv6: ipv6,
	}
	if addr, err := netip.ParseAddr(ip); err == nil && addr.Is6() {
		// An IPv6 pod, as the agent's IPv6 mode answers: an IPv4 egress address beside it, unique while the
		// IPv6 address is held (the Nth address of the list takes the Nth of the egress range).
		a.EgressIP = egressFor(ip, d.all)
	}
	if d.badIP {
		d.badIP = false
		a.IP = "not-an-ip"
	} else if d.routes != nil {
		if d.vethGone {
			d.vethGone = false
			if l, err := netlinkdump.LinkByName(d.routes.Handle, req.HostVeth); err == nil {
				_ = d.routes.Handle.LinkDel(l)
			}
		}
		if err := d.routes.PodUp(context.Background(), podOf(a)); err != nil {
			d.free = append(d.free, entry)
			// A veth gone or already being removed: the plugin makes a new pair and asks again.
			if errors.Is(err, dptypes.ErrHostVethGone) {
				return nil, &api.Error{Code: api.CodeHostVethGone, Message: err.Error(), Retryable: true}
			}
			return nil, &api.Error{Code: api.CodeInternal, Message: err.Error()}
		}
	}
	d.assigned[req.Attachment] = a
	return a, nil
}

func (d *AgentDouble) release(req api.ReleaseRequest) (any, error) {
	if req.Unused {
		d.unused++
	}
	a, ok := d.assigned[req.Attachment]
	if !ok {
		return &api.ReleaseResponse{}, nil
	}
	d.drop(a)
	resp := &api.ReleaseResponse{Released: true, Assignment: a}
	if d.veths != nil {
		resp.HostVethRemoval = api.HostVethRemovalAgent
	}
	return resp, nil
}

func (d *AgentDouble) drop(a *api.Assignment) {
	delete(d.assigned, a.Attachment)
	if ip := net.ParseIP(a.IP); ip != nil {
		entry := a.IP
		if a.IPv6 != "" {
			entry += "," + a.IPv6
		}
		d.free = append(d.free, entry)
		if d.routes != nil {
			// The route usually went with the veth already.
			_ = d.routes.PodDown(context.Background(), podOf(a))
		}
	}
}

// egressFor is the IPv4 egress address of IPv6 address ip: the address of dptypes.IPv4EgressRange at ip's
// position in all, plus one.
func egressFor(ip string, all []string) string {
	e := dptypes.IPv4EgressRange.Addr()
	for range slices.Index(all, ip) + 1 {
		e = e.Next()
	}
	return e.String()
}

// podOf is the assignment as the datapath sees it; an address that does not parse stays the zero Addr, which
// the datapath refuses.
func podOf(a *api.Assignment) dptypes.Pod {
	ip, _ := netip.ParseAddr(a.IP)
	egress, _ := netip.ParseAddr(a.EgressIP)
	ipv6, _ := netip.ParseAddr(a.IPv6)
	return dptypes.Pod{ContainerID: a.ContainerID, IfName: a.IfName, Netns: a.Netns, IP: ip, EgressIP: egress, IPv6: ipv6, HostVeth: a.HostVeth,
		HostIfindex: a.HostIfindex}
}

func (d *AgentDouble) check(req api.CheckRequest) (any, error) {
	a, ok := d.assigned[req.Attachment]
	if !ok {
		return nil, &api.Error{Code: api.CodeNotFound, Message: "no assignment for " + req.ContainerID}
	}
	return a, nil
}

func (d *AgentDouble) gc(req api.GCRequest) (any, error) {
	resp := &api.GCResponse{Released: []api.Assignment{}}
	for att, a := range d.assigned {
		if a.Network == req.Network && !slices.Contains(req.Valid, att) {
			d.drop(a)
			resp.Released = append(resp.Released, *a)
		}
	}
	return resp, nil
}

func (d *AgentDouble) status() *api.Status {
	return &api.Status{Ready: d.ready, Reason: d.reason, Journal: d.journal, Datapath: d.datapath,
		Assigned: len(d.assigned), Warm: len(d.free), PoolStatus: fmt.Sprintf("%d free", len(d.free))}
}

// handle decodes the request body into In, runs f under the double's lock and writes its answer or error.
func handle[In any](d *AgentDouble, f func(In) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in In
		if r.Method == http.MethodPost {
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				writeJSON(w, http.StatusBadRequest, &api.Error{Code: api.CodeBadRequest, Message: err.Error()})
				return
			}
		}
		d.mu.Lock()
		d.calls[r.URL.Path]++
		out, err := f(in)
		d.mu.Unlock()
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) {
				ae = &api.Error{Code: api.CodeInternal, Message: err.Error()}
			}
			status := http.StatusInternalServerError
			switch ae.Code {
			case api.CodeNotFound:
				status = http.StatusNotFound
			case api.CodeBadRequest:
				status = http.StatusBadRequest
			case api.CodeNoIPAvailable, api.CodeNotReady:
				status = http.StatusServiceUnavailable
			}
			writeJSON(w, status, ae)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
