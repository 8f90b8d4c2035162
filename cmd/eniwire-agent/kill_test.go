package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eni"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/simworld"
)

// TestKill9MidAllocationLosesNothing runs the real agent binary against the simulator, kills it with SIGKILL
// at several moments while it allocates ENIs and answers pods, restarts it, and checks the promise.
func TestKill9MidAllocationLosesNothing(t *testing.T) {
	tmp := t.TempDir()
	bin := testenv.Binary(t, "eniwire-agent", "github.com/eniwire/eniwire/cmd/eniwire-agent")
	w := simworld.New(t, simworld.Options{Type: "m5.large"})
	sim, srv, inst := w.Sim, w.Server, w.Instance
	imdsURL, err := srv.OpenIMDS(inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	sock := simworld.SocketPath(t)
	state := filepath.Join(tmp, "state")
	env := append(os.Environ(),
		"AWS_ENDPOINT_URL_EC2="+srv.EC2URL(), "AWS_EC2_METADATA_SERVICE_ENDPOINT="+imdsURL,
		"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_REGION=us-west-2",
		"ENIWIRE_STATE_DIR="+state, "ENIWIRE_SOCKET="+sock, "ENIWIRE_METRICS_ADDR=127.0.0.1:0",
		"ENIWIRE_DATAPATH=none", "ENIWIRE_START_JITTER=0", "ENIWIRE_POOL_INTERVAL=50ms", "ENIWIRE_RELEASE_DELAY=1s",
		"ENIWIRE_RECONCILE_INTERVAL=2s", "ENIWIRE_GC_GRACE=3s", "IP_COOLDOWN_PERIOD=1", "WARM_IP_TARGET=3", "ENIWIRE_LOG_LEVEL=warn")
	start := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = env
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	client := api.NewClient(sock)
	ctx := context.Background()
	answered := map[string]string{}
	next := 0
	// work assigns new pods up to limit and releases the oldest ones beyond keep, until stop closes.
	work := func(stop <-chan struct{}, limit, keep int) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if next < limit {
				cid := fmt.Sprintf("pod-%d", next)
				a, err := client.Assign(ctx, api.AssignRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}})
				if err != nil {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				if prev, ok := answered[cid]; ok && prev != a.IP {
					t.Errorf("%s answered %s then %s", cid, prev, a.IP)
				}
				answered[cid] = a.IP
				next++
				continue
			}
			if len(answered) > keep {
				for cid := range answered {
					// A release cut short by the kill may or may not have reached the journal (CNI DEL is
					// retried), so the pod leaves the set whose survival is asserted either way.
					_, _ = client.Release(ctx, api.ReleaseRequest{Attachment: api.Attachment{ContainerID: cid, IfName: "eth0"}})
					delete(answered, cid)
					break
				}
				continue
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	for round := range 12 {
		cmd := start()
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); work(stop, 3*(round+1), 14-round) }()
		time.Sleep(time.Duration(5+rng.IntN(250)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		close(stop)
		<-done
		t.Logf("round %d: killed with %d pods held, %d assigned so far", round, len(answered), next)
	}
	cmd := start()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := check(client, sim, inst.ID, filepath.Join(state, journal.FileName), answered)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := sim.Counters()["AttachNetworkInterface"].Errors["AttachmentLimitExceeded"]; n != 0 {
		t.Fatalf("simulator sent %d AttachmentLimitExceeded", n)
	}
}

func check(client *api.Client, sim *ec2sim.Sim, instID, journalPath string, answered map[string]string) error {
	list, err := client.Assignments(context.Background())
	if err != nil {
		return err
	}
	st, _, err := journal.Read(journalPath)
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, a := range list {
		if _, dup := got[a.IP]; dup {
			return fmt.Errorf("IP %s assigned twice", a.IP)
		}
		got[a.IP] = a.ContainerID
	}
	for cid, ip := range answered {
		if got[ip] != cid {
			return fmt.Errorf("assignment %s=%s lost (holder %q)", cid, ip, got[ip])
		}
	}
	books := map[string]journal.ENI{}
	for _, e := range st.ENIs {
		if e.ID != "" {
			books[e.ID] = e
		}
		if e.State != journal.Ready && !e.Primary {
			return fmt.Errorf("ENI op %s not at rest: %s", e.OpID, e.State)
		}
	}
	ops := map[string]bool{}
	for _, e := range sim.Snapshot().ENIs {
		if e.Tags[eni.TagOwner] != instID {
			continue
		}
		if ops[e.Tags[eni.TagOpID]] {
			return fmt.Errorf("duplicate ENI for op %s", e.Tags[eni.TagOpID])
		}
		ops[e.Tags[eni.TagOpID]] = true
		b, ok := books[e.ID]
		if !ok || !b.Usable() || e.Attachment == nil || !e.Attachment.DeleteOnTermination {
			return fmt.Errorf("leaked ENI %s (%s, in books %v)", e.ID, e.Status, ok)
		}
		for _, a := range list {
			if a.ENI == e.ID && !slices.Contains(e.IPs, a.IP) {
				return fmt.Errorf("IP %s not on ENI %s in EC2", a.IP, e.ID)
			}
		}
	}
	return nil
}
