package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/agent"
)

// deadlineConn records the read deadlines the server sets on it.
type deadlineConn struct {
	net.Conn
	mu        sync.Mutex
	deadlines []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadlines = append(c.deadlines, t)
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.deadlines) == 0 {
		return time.Time{}
	}
	return c.deadlines[len(c.deadlines)-1]
}

type recordingListener struct {
	net.Listener
	conns chan *deadlineConn
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	dc := &deadlineConn{Conn: c}
	l.conns <- dc
	return dc, nil
}

// TestTheServersBoundIdleConnections: an idle keep-alive connection to the metrics endpoint (or the API
// socket) must not be held open forever: after an answer the server waits for the next request only until an
// idle deadline.
func TestTheServersBoundIdleConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := recordingListener{Listener: inner, conns: make(chan *deadlineConn, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Serve(ctx, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	}()
	defer func() { cancel(); <-done }()
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sc := <-l.conns
	// The server sets the idle deadline right after the answer, before it waits for the next request.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if d := sc.last(); !d.IsZero() && time.Until(d) > 0 && time.Until(d) <= 5*time.Minute {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("an idle keep-alive connection waits without a deadline (last read deadline %v)", sc.last())
}
