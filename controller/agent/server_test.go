package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/controller/metadata"
	"github.com/eniwire/eniwire/test/simworld"
)

type served struct {
	sock   string
	client *api.Client
	node   *controller.Node
	dir    string
	world  *simworld.World
}

// serve starts a node for an m5.4xlarge against a fresh simulator, with its API on a unix socket, and waits
// for a warm pool.
func serve(t testing.TB, factor float64, tweak ...func(*controller.Config)) *served {
	t.Helper()
	w := simworld.New(t, simworld.Options{Type: "m5.4xlarge", Factor: factor})
	dir := t.TempDir()
	ccfg := controller.Config{StateDir: dir, PoolInterval: time.Second, WarmIPTarget: 20}
	for _, f := range tweak {
		f(&ccfg)
	}
	node := w.NewNode(t, ccfg)
	sock, client := simworld.Serve(t, node)
	simworld.WaitStatus(t, client, "ready with a warm pool", func(st *api.Status) bool { return st.Warm >= 20 })
	return &served{sock: sock, client: client, node: node, dir: dir, world: w}
}

func rawPost(t *testing.T, sock, path, body string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Post("http://agent"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAPIAnswersGoodAndBadRequests(t *testing.T) {
	s := serve(t, 200)
	ctx := context.Background()
	req := api.AssignRequest{Attachment: api.Attachment{ContainerID: "c1", IfName: "eth0"}, Netns: "/var/run/netns/x",
		Pod: api.PodIdentity{Namespace: "default", Name: "p", UID: "u"}, HostIfindex: 7}

	t.Run("an assign answers IP, ENI, gateway and subnet", func(t *testing.T) {
		a, err := s.client.Assign(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if a.IP == "" || a.ENI == "" || a.Gateway != "10.0.0.1" || a.SubnetCIDR != "10.0.0.0/20" || a.Pod.Name != "p" {
			t.Fatalf("assignment %+v", a)
		}
	})
	t.Run("a repeated assign for the same container gets the same answer", func(t *testing.T) {
		a1, err1 := s.client.Assign(ctx, req)
		a2, err2 := s.client.Assign(ctx, req)
		if err1 != nil || err2 != nil || a1.IP != a2.IP || a1.ENI != a2.ENI {
			t.Fatalf("repeated assigns: %+v %v / %+v %v", a1, err1, a2, err2)
		}
	})
	t.Run("the assignment is on disk when answered", func(t *testing.T) {
		st, _, err := journal.Read(filepath.Join(s.dir, journal.FileName))
		if err != nil {
			t.Fatal(err)
		}
		if a := st.Assignment("c1", "eth0"); a == nil || a.PodUID != "u" || a.Netns != "/var/run/netns/x" {
			t.Fatalf("journal assignment %+v", a)
		}
	})
	t.Run("check finds a known container and not an unknown one", func(t *testing.T) {
		if _, err := s.client.Check(ctx, api.CheckRequest{Attachment: req.Attachment}); err != nil {
			t.Fatal(err)
		}
		_, err := s.client.Check(ctx, api.CheckRequest{Attachment: api.Attachment{ContainerID: "nope", IfName: "eth0"}})
		if api.ErrorCode(err) != api.CodeNotFound {
			t.Fatalf("check of unknown = %v", err)
		}
	})
	t.Run("a release of an unknown container succeeds with released false", func(t *testing.T) {
		r, err := s.client.Release(ctx, api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "nope", IfName: "eth0"}})
		if err != nil || r.Released {
			t.Fatalf("release unknown = %+v, %v", r, err)
		}
	})
	for _, tc := range []struct{ name, path, body string }{
		{"malformed JSON", api.PathAssign, `{"containerID": `},
		{"an unknown field", api.PathAssign, `{"containerID":"a","ifName":"eth0","bogus":1}`},
		{"a missing container id", api.PathAssign, `{"ifName":"eth0"}`},
		{"a missing ifname on release", api.PathRelease, `{"containerID":"a"}`},
	} {
		t.Run(tc.name+" is a bad request", func(t *testing.T) {
			code, body := rawPost(t, s.sock, tc.path, tc.body)
			if code != http.StatusBadRequest || !strings.Contains(body, api.CodeBadRequest) {
				t.Fatalf("HTTP %d %s", code, body)
			}
		})
	}
	t.Run("GC releases every assignment not in the valid list", func(t *testing.T) {
		for _, cid := range []string{"g1", "g2"} {
			if _, err := s.client.Assign(ctx, api.AssignRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}}); err != nil {
				t.Fatal(err)
			}
		}
		r, err := s.client.GC(ctx, api.GCRequest{Valid: []api.Attachment{{ContainerID: "c1", IfName: "eth0"}}})
		if err != nil || len(r.Released) != 2 {
			t.Fatalf("GC = %+v, %v", r, err)
		}
		list, err := s.client.Assignments(ctx)
		if err != nil || len(list) != 1 || list[0].ContainerID != "c1" {
			t.Fatalf("after GC: %+v %v", list, err)
		}
	})
	t.Run("the socket is mode 0600", func(t *testing.T) {
		fi, err := os.Stat(s.sock)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket mode %v %v", fi.Mode(), err)
		}
	})
}

// TestAnEmptyPoolFailsFastAndRetryablyWithoutTheADDWait: with ENIWIRE_ADD_WAIT off, an ADD that finds the pool
// empty is answered at once, retryably.
func TestAnEmptyPoolFailsFastAndRetryablyWithoutTheADDWait(t *testing.T) {
	s := serve(t, 50, func(c *controller.Config) { c.AddWait = -1 })
	// The pool's growth is held (EC2 answers it only after 10 virtual minutes), so that the ADDs find it
	// empty however fast the machine runs them against the refill.
	for _, action := range []string{"AssignPrivateIpAddresses", "CreateNetworkInterface"} {
		s.world.Sim.Faults().SetLatency(action, 10*time.Minute)
	}
	last := exhaust(t, s)
	var ae *api.Error
	if !errors.As(last, &ae) || ae.Code != api.CodeNoIPAvailable || !ae.Retryable {
		t.Fatalf("exhausting the pool ended with %v, want a retryable %s", last, api.CodeNoIPAvailable)
	}
}

// TestADDsWaitForTheRefillUntilMaxPodsThenFailFastAndRetryably: with the default ADD wait, ADDs that find the
// pool empty wait for its growth and succeed, up to max pods; the next is answered at once, retryably, naming
// the cause.
func TestADDsWaitForTheRefillUntilMaxPodsThenFailFastAndRetryably(t *testing.T) {
	s := serve(t, 50)
	last := exhaust(t, s)
	var ae *api.Error
	if !errors.As(last, &ae) || ae.Code != api.CodeMaxPods || !ae.Retryable || !strings.Contains(ae.Message, "MAX_PODS") {
		t.Fatalf("filling the node ended with %v, want a retryable %s naming MAX_PODS", last, api.CodeMaxPods)
	}
	st, err := s.client.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Assigned != st.MaxPods {
		t.Fatalf("the first failing ADD came at %d pods assigned, want max pods %d", st.Assigned, st.MaxPods)
	}
}

// exhaust sends ADDs until one fails, checks that the failing answer came at once, and returns it.
func exhaust(t *testing.T, s *served) error {
	t.Helper()
	ctx := context.Background()
	var last error
	for i := 0; i < 500 && last == nil; i++ {
		start := time.Now()
		_, last = s.client.Assign(ctx, api.AssignRequest{Attachment: api.Attachment{ContainerID: fmt.Sprintf("x%d", i), IfName: "eth0"}})
		if last != nil && time.Since(start) > 100*time.Millisecond {
			t.Fatalf("the failing answer took %s: it waited on EC2", time.Since(start))
		}
	}
	return last
}

func TestACorruptJournalStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, journal.FileName)
	content := "ENIWIRE-JOURNAL v7\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := controller.New(controller.Config{StateDir: dir}, controller.Deps{EC2: ec2.New(ec2.Options{Region: "us-west-2"}),
		Node: metadata.Node{InstanceID: "i-1", Limits: metadata.Limits{MaxENIs: 3, IPv4PerENI: 10}}})
	if !errors.Is(err, journal.ErrUnknownVersion) || !strings.Contains(err.Error(), "unknown format version") {
		t.Fatalf("New with a v7 journal = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != content {
		t.Fatalf("journal changed: %q", b)
	}
}
