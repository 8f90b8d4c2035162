package controller_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// wireLog records every EC2 request on the wire, SDK retries included: its action, the ENI it names and the
// status of its answer.
type wireLog struct {
	next http.RoundTripper

	mu   sync.Mutex
	reqs []wireReq
}

type wireReq struct {
	action, eni string
	status      int
}

func (l *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	q, _ := url.ParseQuery(string(body))
	eni := q.Get("NetworkInterfaceId")
	if eni == "" {
		eni = q.Get("NetworkInterfaceId.1")
	}
	resp, err := l.next.RoundTrip(r)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, wireReq{action: q.Get("Action"), eni: eni, status: status})
	l.mu.Unlock()
	return resp, err
}

func (l *wireLog) snapshot() []wireReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// TestAnAmbiguousAssignIsReadBackBeforeAnyOtherAssign: an AssignPrivateIpAddresses that failed with a 5xx may
// have been applied. It is not retried blindly (by the SDK or the pool): the ENI is read from EC2 first, and
// the IPs (or, in prefix mode, the prefixes) it was given join the books.
func TestAnAmbiguousAssignIsReadBackBeforeAnyOtherAssign(t *testing.T) {
	for _, prefixes := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefix delegation %v", prefixes), func(t *testing.T) {
			w := newWorld(t, "m5.large", 200)
			wire := &wireLog{next: http.DefaultTransport}
			client := w.ec2With(nil, &http.Client{Transport: wire, Timeout: 10 * time.Second})
			w.sim.Faults().FailAfterApply("AssignPrivateIpAddresses", "InternalError", 1)
			cfg := fastConfig(w.dir)
			cfg.WarmIPTarget = 3
			cfg.EnablePrefixDelegation = prefixes
			r := w.start(cfg, client, nil)
			waitReady(t, r.node)
			eventually(t, 20*time.Second, "the pool at rest", func() error {
				if n := w.sim.Counters()["AssignPrivateIpAddresses"].Errors["InternalError"]; n == 0 {
					return errors.New("no assign failed yet")
				}
				if s := r.node.Status(); s.Warm < 3 || len(s.Pending) > 0 {
					return fmt.Errorf("warm %d, pending %+v", s.Warm, s.Pending)
				}
				return nil
			})
			reqs := wire.snapshot()
			failed := slices.IndexFunc(reqs, func(q wireReq) bool { return q.action == "AssignPrivateIpAddresses" && q.status >= 500 })
			if failed < 0 {
				t.Fatal("no failed AssignPrivateIpAddresses on the wire")
			}
			eni := reqs[failed].eni
			for _, q := range reqs[failed+1:] {
				if q.action == "DescribeNetworkInterfaces" && q.eni == eni {
					break
				}
				if q.action == "AssignPrivateIpAddresses" {
					t.Fatalf("AssignPrivateIpAddresses on %s sent again before %s was read back after an ambiguous failure; wire: %+v",
						q.eni, eni, reqs[failed:])
				}
			}
			// Every IP and prefix EC2 holds on the ENI is in the books, with nothing pending.
			e, _ := w.sim.ENI(eni)
			books := booksIPs(r.node.Snapshot())
			held := append(slices.Clone(e.IPs[1:]), e.Prefixes...)
			if prefixes && len(e.Prefixes) == 0 {
				t.Error("in prefix mode the ENI holds no prefix")
			}
			for _, ip := range held {
				if books[ip] != eni {
					t.Errorf("slot %s, assigned to %s by the call that answered 500, is not in the books", ip, eni)
				}
			}
		})
	}
}
