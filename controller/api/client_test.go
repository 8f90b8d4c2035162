package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve runs h on a unix socket of the test's own and returns a client for it.
func serve(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return NewClient(sock)
}

// An answer too long for net/http to size in advance (which HTTP/1.1 would send in chunks) arrives whole.
func TestALongAnswerArrivesWhole(t *testing.T) {
	const n = 2000
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != PathAssignments || r.Method != "GET" {
			http.Error(w, "wrong request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, "[")
		for i := range n {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"containerID":"c%d","ifName":"eth0","ip":"10.0.%d.%d"}`, i, i/250, i%250)
			if i%100 == 0 {
				w.(http.Flusher).Flush()
			}
		}
		fmt.Fprint(w, "]")
	})
	got, err := c.Assignments(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || got[n-1].ContainerID != fmt.Sprintf("c%d", n-1) {
		t.Fatalf("got %d assignments, the last %+v; want %d", len(got), got[len(got)-1], n)
	}
}

// A request carries its JSON body, and an error answer becomes the agent's *Error.
func TestARequestCarriesItsBodyAndAnErrorAnswerIsTheAgentsError(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		var req AssignRequest
		if err := decodeJSON(r, &req); err != nil || req.ContainerID != "c1" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, fmt.Sprintf("bad body: %v %+v", err, req), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"code":"no_ip_available","message":"pool empty","retryable":true}`)
	})
	_, err := c.Assign(context.Background(), AssignRequest{Attachment: Attachment{ContainerID: "c1", IfName: "eth0"}})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeNoIPAvailable || !ae.Retryable {
		t.Fatalf("got %v, want the agent's no_ip_available error", err)
	}
}

// An agent that never answers is unreachable once the caller's context ends, and the call returns then.
func TestAnAgentThatNeverAnswersIsUnreachableAtTheDeadline(t *testing.T) {
	release := make(chan struct{})
	c := serve(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Status(ctx)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrUnreachable and the deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the call returned after %v", took)
	}
}

// No socket: unreachable.
func TestNoSocketIsUnreachable(t *testing.T) {
	_, err := NewClient(filepath.Join(t.TempDir(), "none.sock")).Status(context.Background())
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
}

func TestParseAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		status       int
		body, err    string
	}{
		{"eof-delimited", "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{}", 200, "{}", ""},
		{"content-length trims", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}xx", 200, "{}", ""},
		{"cut off", "HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\n{}", 0, "", "cut off"},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 0, "", "chunked"},
		{"no header end", "HTTP/1.0 200 OK\r\nContent-Len", 0, "", "inside its header"},
		{"not http", "SSH-2.0-x\r\n\r\n", 0, "", "not HTTP"},
		{"empty", "", 0, "", "inside its header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, err := parseAnswer([]byte(tc.answer))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil || status != tc.status || string(body) != tc.body {
				t.Fatalf("got %d %q %v, want %d %q", status, body, err, tc.status, tc.body)
			}
		})
	}
}

func decodeJSON(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

// An answer that says its length is read to that length: the call returns without waiting for the agent to
// close the connection.
func TestAnAnswerEndsAtItsContentLengthNotAtTheClose(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hold := make(chan struct{})
	defer close(hold)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 4096)
		_, _ = conn.Read(buf)
		body := `{"ready":true,"warm":3}`
		fmt.Fprintf(conn, "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		<-hold // the connection stays open until the test ends
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	st, err := NewClient(sock).Status(ctx)
	if err != nil || !st.Ready || st.Warm != 3 {
		t.Fatalf("got %+v, %v; want the answer", st, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the call returned after %v, at the deadline rather than at the answer's end", took)
	}
}
