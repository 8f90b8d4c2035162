package fleet

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// DescribeCause is the DescribeNetworkInterfaces requests of one cause, and how many of them EC2 throttled.
type DescribeCause struct {
	Calls     int64 `json:"calls"`
	Throttled int64 `json:"throttled"`
}

// describeCauses counts every DescribeNetworkInterfaces request a strategy's nodes send, SDK retries included,
// by what sent it: "start-up" while the node has not had EC2's first answer, else the controller function that
// asked (the eni.Manager method the call came through, and the one that described, when they differ). It is
// what shows which part of a node spends the account's describe bucket.
type describeCauses struct {
	mu     sync.Mutex
	counts map[string]*DescribeCause
}

func newDescribeCauses() *describeCauses { return &describeCauses{counts: map[string]*DescribeCause{}} }

// reset forgets what was counted (the fragmenting fill's calls, before the scenario's nodes start).
func (d *describeCauses) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts = map[string]*DescribeCause{}
}

// snapshot copies the counts.
func (d *describeCauses) snapshot() map[string]DescribeCause {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]DescribeCause, len(d.counts))
	for c, n := range d.counts {
		out[c] = *n
	}
	return out
}

func (d *describeCauses) add(cause string, throttled bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.counts[cause]
	if n == nil {
		n = &DescribeCause{}
		d.counts[cause] = n
	}
	n.Calls++
	if throttled {
		n.Throttled++
	}
}

// client wraps next so that the node's describes are counted; ready says whether the node has had EC2's first
// answer (nil: always).
func (d *describeCauses) client(next ec2.HTTPClient, ready func() bool) ec2.HTTPClient {
	return describeCountingClient{next: next, d: d, ready: ready}
}

type describeCountingClient struct {
	next  ec2.HTTPClient
	d     *describeCauses
	ready func() bool
}

func (c describeCountingClient) Do(req *http.Request) (*http.Response, error) {
	cause := ""
	if req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			body, _ := io.ReadAll(b)
			if bytes.Contains(body, []byte("Action=DescribeNetworkInterfaces")) {
				cause = describeCaller()
				if c.ready != nil && !c.ready() {
					cause = "start-up: " + cause
				}
			}
		}
	}
	resp, err := c.next.Do(req)
	if cause != "" {
		c.d.add(cause, err == nil && resp.StatusCode == http.StatusServiceUnavailable)
	}
	return resp, err
}

// describeCaller names the caller of a describe from the stack: the outermost method of the controller's ENI
// manager and the innermost function of the project outside the EC2 client (the SDK's client runs the
// transport in the caller's goroutine).
func describeCaller() string {
	pcs := make([]uintptr, 96)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	const project = "github.com/eniwire/eniwire/"
	inner, outer := "", ""
	for {
		fr, more := frames.Next()
		fn := fr.Function
		if strings.HasPrefix(fn, project) && !strings.Contains(fn, "/controller/ec2client.") &&
			!strings.HasSuffix(fn, ".describeOne") && !strings.HasSuffix(fn, ".describeFiltered") && !strings.Contains(fn, ".func") {
			short := fn[strings.LastIndex(fn, "/")+1:]
			if inner == "" {
				inner = short
			}
			if strings.Contains(fn, "/controller/eni.(*Manager).") || outer == "" {
				outer = short
			}
		}
		if !more {
			break
		}
	}
	switch {
	case inner == "":
		return "unknown"
	case inner == outer:
		return inner
	}
	return outer + " > " + inner
}

// describeCauseLines prints the causes, the most calls first.
func describeCauseLines(causes map[string]DescribeCause) []string {
	names := make([]string, 0, len(causes))
	for c := range causes {
		names = append(names, c)
	}
	sort.Slice(names, func(i, j int) bool { return causes[names[i]].Calls > causes[names[j]].Calls })
	out := make([]string, 0, len(names))
	for _, c := range names {
		out = append(out, fmt.Sprintf("%s: %d (%d throttled)", c, causes[c].Calls, causes[c].Throttled))
	}
	return out
}
