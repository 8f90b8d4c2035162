package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// Client talks to the agent over its unix socket. It is safe for concurrent use.
//
// It speaks HTTP/1.0 itself, a connection per call, rather than through net/http: the CNI plugin is a process
// per ADD, and net/http (with crypto/tls under it) costs the plugin two milliseconds of start-up, more than
// the agent's whole answer. HTTP/1.0 makes the agent's net/http server end every answer by closing the
// connection, never by chunks, so an answer is what arrives before the close.
type Client struct {
	socket  string
	dial    time.Duration // connecting to the socket
	timeout time.Duration // a whole call, unless the context ends it sooner
}

// NewClient returns a client for the agent listening on socket.
func NewClient(socket string) *Client {
	return &Client{socket: socket, dial: 2 * time.Second, timeout: 30 * time.Second}
}

// maxAnswer bounds what the client reads of one answer.
const maxAnswer = 16 << 20

// Assign asks for an IP for req's attachment. Errors: *Error (CodeNoIPAvailable, CodeNotReady,
// CodeBadRequest, ...) or an error wrapping ErrUnreachable.
func (c *Client) Assign(ctx context.Context, req AssignRequest) (*Assignment, error) {
	return c.SendAssign(ctx, req).Answer()
}

// PendingAssign is an Assign request the agent is working on.
type PendingAssign struct{ sent *sent }

// SendAssign sends an Assign request and returns without waiting for the answer, so the caller can do work
// that does not need it while the agent journals the assignment. Answer returns what Assign would; call it
// exactly once.
func (c *Client) SendAssign(ctx context.Context, req AssignRequest) *PendingAssign {
	return &PendingAssign{sent: c.send(ctx, "POST", PathAssign, req)}
}

// Answer waits for the agent's answer. Errors as for Assign.
func (p *PendingAssign) Answer() (*Assignment, error) {
	var out Assignment
	if err := p.sent.answer(&out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Release gives back the attachment's IP. An unknown attachment is not an error.
func (c *Client) Release(ctx context.Context, req ReleaseRequest) (*ReleaseResponse, error) {
	var out ReleaseResponse
	if err := c.do(ctx, "POST", PathRelease, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Check returns the agent's record of the attachment; *Error with CodeNotFound when it has none.
func (c *Client) Check(ctx context.Context, req CheckRequest) (*Assignment, error) {
	var out Assignment
	if err := c.do(ctx, "POST", PathCheck, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Assignments lists every assignment the agent holds.
func (c *Client) Assignments(ctx context.Context) ([]Assignment, error) {
	var out []Assignment
	if err := c.do(ctx, "GET", PathAssignments, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Status returns the agent's status. It answers even while the agent is not ready (Ready false, Reason set).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var out Status
	if err := c.do(ctx, "GET", PathStatus, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Policy returns the pod's (namespace/name) compiled NetworkPolicy, explaining flow when it is not "".
func (c *Client) Policy(ctx context.Context, pod, flow string) (*PolicyReport, error) {
	q := url.Values{"pod": {pod}}
	if flow != "" {
		q.Set("explain", flow)
	}
	var out PolicyReport
	if err := c.do(ctx, "GET", PathPolicy+"?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GC releases every assignment whose attachment is not in req.Valid.
func (c *Client) GC(ctx context.Context, req GCRequest) (*GCResponse, error) {
	var out GCResponse
	if err := c.do(ctx, "POST", PathGC, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.send(ctx, method, path, in).answer(out)
}

// sent is a request written to the agent on a connection of its own, whose answer is not read yet: the
// agent works on it meanwhile. answer reads the answer and ends the call; every sent request is answered.
type sent struct {
	socket, path string
	ctx          context.Context
	conn         net.Conn
	end          func() // closes the connection and ends ctx
	err          error  // why the request could not be sent; answer returns it
}

// send encodes in (when not nil) and writes the request; an error is kept for answer to return.
func (c *Client) send(ctx context.Context, method, path string, in any) *sent {
	s := &sent{socket: c.socket, path: path}
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			s.err = fmt.Errorf("encoding %s request: %w", path, err)
			return s
		}
		body = b
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	dialer := net.Dialer{Timeout: c.dial}
	conn, err := dialer.DialContext(ctx, "unix", c.socket)
	if err != nil {
		cancel()
		s.err = s.unreachable(err)
		return s
	}
	// The context alone ends the call (its deadline included), so a read cut short always says why.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	s.ctx, s.conn = ctx, conn
	s.end = func() {
		stop()
		conn.Close()
		cancel()
	}

	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.0\r\nHost: agent\r\n", method, path)
	if body != nil {
		fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		s.end()
		s.err = s.unreachable(ctxErr(ctx, err))
	}
	return s
}

// answer waits for the agent's answer and decodes it into out (when not nil); an answer that is not 2xx
// becomes *Error.
func (s *sent) answer(out any) error {
	if s.err != nil {
		return s.err
	}
	defer s.end()
	raw, err := readAnswer(io.LimitReader(s.conn, maxAnswer+1))
	if err != nil {
		return s.unreachable(ctxErr(s.ctx, err))
	}
	if len(raw) > maxAnswer {
		return s.unreachable(fmt.Errorf("the answer to %s is over %d bytes", s.path, maxAnswer))
	}
	status, body, err := parseAnswer(raw)
	if err != nil {
		return s.unreachable(err)
	}
	if status/100 != 2 {
		apiErr := &Error{}
		if json.Unmarshal(body, apiErr) != nil || apiErr.Code == "" {
			apiErr = &Error{Code: CodeInternal, Message: fmt.Sprintf("HTTP %d: %s", status, bytes.TrimSpace(body))}
		}
		return apiErr
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding %s answer: %w", s.path, err)
	}
	return nil
}

func (s *sent) unreachable(err error) error {
	return fmt.Errorf("calling agent at %s: %w: %w", s.socket, ErrUnreachable, err)
}

// ctxErr says the context's reason when it ended the call.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return err
}

// readAnswer reads an answer up to the end its Content-Length marks, or else to the end of the stream. The
// agent closes the connection after every answer, but its net/http sends the length first: stopping there
// spares the plugin the wait for the close, a wake-up of the agent's connection goroutine.
func readAnswer(r io.Reader) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	end := -1 // where the answer ends, once its head has said
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if end < 0 {
			if head, _, ok := bytes.Cut(buf, []byte("\r\n\r\n")); ok {
				length, known, lerr := contentLength(bytes.Split(head, []byte("\r\n"))[1:])
				if lerr != nil || !known {
					// No usable length (parseAnswer says what is wrong with it): the close ends the answer.
					return readToEOF(r, buf, err)
				}
				end = len(head) + len("\r\n\r\n") + length
			}
		}
		switch {
		case end >= 0 && len(buf) >= end:
			return buf, nil
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return buf, err
		}
	}
}

// readToEOF appends the rest of r to buf; err is the last read's.
func readToEOF(r io.Reader, buf []byte, err error) ([]byte, error) {
	if err != nil {
		if err == io.EOF {
			err = nil
		}
		return buf, err
	}
	rest, err := io.ReadAll(r)
	return append(buf, rest...), err
}

// parseAnswer splits an HTTP/1.x answer into its status code and body, checking the body against a
// Content-Length when the answer has one (a short body is an answer cut off).
func parseAnswer(answer []byte) (int, []byte, error) {
	head, body, ok := bytes.Cut(answer, []byte("\r\n\r\n"))
	if !ok {
		return 0, nil, errors.New("the answer ended inside its header")
	}
	lines := bytes.Split(head, []byte("\r\n"))
	proto, rest, _ := bytes.Cut(lines[0], []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	status, err := strconv.Atoi(string(code))
	if !bytes.HasPrefix(proto, []byte("HTTP/1.")) || err != nil || status < 100 || status > 999 {
		return 0, nil, fmt.Errorf("the answer's status line %q is not HTTP", lines[0])
	}
	for _, line := range lines[1:] {
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		if bytes.EqualFold(name, []byte("Transfer-Encoding")) && !bytes.EqualFold(value, []byte("identity")) {
			return 0, nil, fmt.Errorf("the answer came in %s transfer encoding, which an HTTP/1.0 client does not take", value)
		}
	}
	n, known, err := contentLength(lines[1:])
	if err != nil {
		return 0, nil, err
	}
	if known {
		if len(body) < n {
			return 0, nil, fmt.Errorf("the answer was cut off after %d of its %d bytes", len(body), n)
		}
		body = body[:n]
	}
	return status, body, nil
}

// contentLength reads the Content-Length header among an answer's header lines; known is false when there is
// none.
func contentLength(headers [][]byte) (n int, known bool, err error) {
	for _, line := range headers {
		name, value, _ := bytes.Cut(line, []byte(":"))
		if !bytes.EqualFold(name, []byte("Content-Length")) {
			continue
		}
		value = bytes.TrimSpace(value)
		n, err := strconv.Atoi(string(value))
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("the answer's Content-Length %q is not a length", value)
		}
		return n, true, nil
	}
	return 0, false, nil
}
