package dpbench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The VPC host's TCP ports for connect/request/close: crrPort answers, probePort is a listener no policy
// of the policy rows allows (policy.go), so a connection to it tells whether a policy is enforced.
const (
	crrPort   = 5202
	probePort = 5203
)

// crrMessage is the size of a request and of its answer.
const crrMessage = 64

// crrServer answers each connection's requests of crrMessage bytes with the same bytes until the client
// closes it.
type crrServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	done chan struct{}
}

// startCRRServer listens on ln and serves it until Close.
func startCRRServer(ln net.Listener) *crrServer {
	s := &crrServer{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				buf := make([]byte, crrMessage)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *crrServer) Close() error {
	err := s.ln.Close()
	<-s.done
	s.wg.Wait()
	return err
}

// CRRResult is one run of TCP connect/request/close.
type CRRResult struct {
	Transactions int
	Rate         float64 // transactions per second
	P50, P99     time.Duration
}

// crrTimeout bounds one transaction: far above a transaction here (tens of µs to a few ms through a
// userspace verdict), short enough that a refused flow fails fast.
const crrTimeout = 500 * time.Millisecond

// TCPConnectRequestClose runs netperf's TCP_CRR shape from the pod to to for about d: one transaction at a
// time, each a new connection (handshake, a 64-byte request, its 64-byte answer, the client's close).
// Every transaction's flow is new to conntrack and to any policy, so the rate is what a first packet costs.
func TCPConnectRequestClose(ctx context.Context, t *Topology, to netip.AddrPort, d time.Duration) (CRRResult, error) {
	var res CRRResult
	err := t.Do(t.Pod, func() error {
		lat := make([]time.Duration, 0, 1<<15)
		start := time.Now()
		for end := start.Add(d); time.Now().Before(end) && ctx.Err() == nil; {
			t0 := time.Now()
			if err := crrTransaction(to, crrTimeout); err != nil {
				return fmt.Errorf("transaction %d to %s: %w", len(lat)+1, to, err)
			}
			lat = append(lat, time.Since(t0))
		}
		if len(lat) == 0 {
			return fmt.Errorf("no transaction to %s in %s", to, d)
		}
		elapsed := time.Since(start)
		slices.Sort(lat)
		res = CRRResult{Transactions: len(lat), Rate: float64(len(lat)) / elapsed.Seconds(), P50: percentile(lat, 50), P99: percentile(lat, 99)}
		return nil
	})
	return res, err
}

// crrTransaction is one connection: connect, request, answer, close. It must run on a thread in the pod's
// namespace (the socket is made there).
func crrTransaction(to netip.AddrPort, within time.Duration) error {
	deadline := time.Now().Add(within)
	c, err := (&net.Dialer{Deadline: deadline}).Dial("tcp4", to.String())
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	req := make([]byte, crrMessage)
	if _, err := c.Write(req); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, req); err != nil {
		return err
	}
	return nil
}

// connects reports whether the pod completes one transaction with to within d: false when the connection
// is refused, reset or left silent (a policy dropping it).
func connects(t *Topology, to netip.AddrPort, d time.Duration) (bool, error) {
	var ok bool
	err := t.Do(t.Pod, func() error {
		ok = crrTransaction(to, d) == nil
		return nil
	})
	return ok, err
}
