package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/internal/testenv"
	"github.com/eniwire/eniwire/test/simnode"
)

// TestTheDemoStoryKeepsTheBooksAndTheTraffic plays the whole demo without a terminal, as CI does: pods
// spill over three ENIs, the agent is killed with SIGKILL while EC2 throttles the third ENI's commit, and
// after the restart the books match EC2, every ENI is set to be deleted on termination, an open TCP flow
// survived and every pod still talks to the VPC host and to another pod; then prefix delegation is turned on
// and a pod gets an address of a /28 prefix, which talks too. Nothing is left behind.
func TestTheDemoStoryKeepsTheBooksAndTheTraffic(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"ip", "nft", "bpftool"} {
		testenv.RequireTool(t, tool)
	}
	name := fmt.Sprintf("ewdt%d-%04x", os.Getpid(), time.Now().UnixNano()&0xffff)
	t.Cleanup(func() {
		// A failed run may leave things behind; removing them is part of the test.
		if removed, err := simnode.Cleanup(name, ""); err != nil || len(removed) != 0 {
			t.Errorf("the demo left %v behind (cleanup error %v)", removed, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out strings.Builder
	var res result
	code := run(ctx, &out, config{name: name, res: &res})
	if code != 0 {
		t.Fatalf("the demo exited %d:\n%s", code, out.String())
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"the pods use three ENIs", res.ENIs == 3},
		{"no ENI leaked", len(res.BooksAfter.Leaked) == 0},
		{"no ENI was lost", len(res.BooksAfter.Lost) == 0},
		{"the books hold the primary and two more ENIs", len(res.BooksAfter.Rows) == 3},
		{"every traffic check passed", res.TrafficErrors == 0},
		{"the TCP flow kept exchanging across the restart", res.FlowExchanges > 30},
		{"the output shows the books table", strings.Contains(out.String(), "AGENT'S BOOKS")},
		{"in prefix mode a pod got an address of a /28 prefix", res.PrefixPod != ""},
		{"eniwirectl enis shows a row per prefix", strings.Contains(out.String(), "  prefix ")},
		{"the output shows the progress line", strings.Contains(out.String(), "waiting on EC2: ENI eni-")},
		{"the output ends with success", strings.Contains(out.String(), "demo: done")},
	}
	for _, c := range checks {
		t.Run(c.what, func(t *testing.T) {
			if !c.ok {
				t.Errorf("not so (result %+v); output:\n%s", res, out.String())
			}
		})
	}
	for _, r := range res.BooksAfter.Rows {
		if !r.AgentDoT || !r.EC2DoT {
			t.Errorf("ENI %s: DeleteOnTermination %v in the books, %v in EC2; want true in both", r.ID, r.AgentDoT, r.EC2DoT)
		}
	}
}
