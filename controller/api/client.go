package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
	var out Assignment
	if err := c.do(ctx, "POST", PathAssign, req, &out); err != nil {
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

// GC releases every assignment whose attachment is not in req.Valid.
func (c *Client) GC(ctx context.Context, req GCRequest) (*GCResponse, error) {
	var out GCResponse
	if err := c.do(ctx, "POST", PathGC, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s request: %w", path, err)
		}
		body = b
	}
	status, raw, err := c.roundTrip(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("calling agent at %s: %w: %w", c.socket, ErrUnreachable, err)
	}
	if status/100 != 2 {
		apiErr := &Error{}
		if json.Unmarshal(raw, apiErr) != nil || apiErr.Code == "" {
			apiErr = &Error{Code: CodeInternal, Message: fmt.Sprintf("HTTP %d: %s", status, bytes.TrimSpace(raw))}
		}
		return apiErr
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding %s answer: %w", path, err)
	}
	return nil
}

// roundTrip sends one request on a connection of its own and returns the answer's status code and body.
func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	dialer := net.Dialer{Timeout: c.dial}
	conn, err := dialer.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	// The context alone ends the call (its deadline included), so a read cut short always says why.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.0\r\nHost: agent\r\n", method, path)
	if body != nil {
		fmt.Fprintf(&req, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		return 0, nil, ctxErr(ctx, err)
	}
	answer, err := io.ReadAll(io.LimitReader(conn, maxAnswer+1))
	if err != nil {
		return 0, nil, ctxErr(ctx, err)
	}
	if len(answer) > maxAnswer {
		return 0, nil, fmt.Errorf("the answer to %s is over %d bytes", path, maxAnswer)
	}
	return parseAnswer(answer)
}

// ctxErr says the context's reason when it ended the call.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return err
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
		switch {
		case bytes.EqualFold(name, []byte("Transfer-Encoding")) && !bytes.EqualFold(value, []byte("identity")):
			return 0, nil, fmt.Errorf("the answer came in %s transfer encoding, which an HTTP/1.0 client does not take", value)
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return 0, nil, fmt.Errorf("the answer's Content-Length %q is not a length", value)
			}
			if len(body) < n {
				return 0, nil, fmt.Errorf("the answer was cut off after %d of its %d bytes", len(body), n)
			}
			body = body[:n]
		}
	}
	return status, body, nil
}
