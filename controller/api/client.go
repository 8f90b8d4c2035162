package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client talks to the agent over its unix socket. It is safe for concurrent use.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the agent listening on socket.
func NewClient(socket string) *Client {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	return &Client{
		socket: socket,
		http: &http.Client{
			Timeout: 30 * time.Second,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return dialer.DialContext(ctx, "unix", socket)
				},
				DisableCompression: true,
				MaxIdleConns:       4,
			},
		},
	}
}

// Assign asks for an IP for req's attachment. Errors: *Error (CodeNoIPAvailable, CodeNotReady,
// CodeBadRequest, ...) or an error wrapping ErrUnreachable.
func (c *Client) Assign(ctx context.Context, req AssignRequest) (*Assignment, error) {
	var out Assignment
	if err := c.do(ctx, http.MethodPost, PathAssign, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Release gives back the attachment's IP. An unknown attachment is not an error.
func (c *Client) Release(ctx context.Context, req ReleaseRequest) (*ReleaseResponse, error) {
	var out ReleaseResponse
	if err := c.do(ctx, http.MethodPost, PathRelease, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Check returns the agent's record of the attachment; *Error with CodeNotFound when it has none.
func (c *Client) Check(ctx context.Context, req CheckRequest) (*Assignment, error) {
	var out Assignment
	if err := c.do(ctx, http.MethodPost, PathCheck, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Assignments lists every assignment the agent holds.
func (c *Client) Assignments(ctx context.Context) ([]Assignment, error) {
	var out []Assignment
	if err := c.do(ctx, http.MethodGet, PathAssignments, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Status returns the agent's status. It answers even while the agent is not ready (Ready false, Reason set).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var out Status
	if err := c.do(ctx, http.MethodGet, PathStatus, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GC releases every assignment whose attachment is not in req.Valid.
func (c *Client) GC(ctx context.Context, req GCRequest) (*GCResponse, error) {
	var out GCResponse
	if err := c.do(ctx, http.MethodPost, PathGC, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s request: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, body)
	if err != nil {
		return fmt.Errorf("building %s request: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("calling agent at %s: %w: %w", c.socket, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading %s answer: %w: %w", path, ErrUnreachable, err)
	}
	if resp.StatusCode/100 != 2 {
		apiErr := &Error{}
		if json.Unmarshal(raw, apiErr) != nil || apiErr.Code == "" {
			apiErr = &Error{Code: CodeInternal, Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))}
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
