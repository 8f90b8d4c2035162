// Package agent serves the node controller: the versioned HTTP/JSON API over a unix socket that the CNI plugin
// calls, and the metrics, health and readiness endpoints over TCP.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// Controller is what the API serves; *controller.Node implements it.
type Controller interface {
	Assign(ctx context.Context, req api.AssignRequest) (*api.Assignment, error)
	Release(ctx context.Context, req api.ReleaseRequest) (*api.ReleaseResponse, error)
	Check(ctx context.Context, req api.CheckRequest) (*api.Assignment, error)
	Assignments() []api.Assignment
	GC(ctx context.Context, req api.GCRequest) (*api.GCResponse, error)
	Status() *api.Status
	Ready() (bool, string)
	// Healthy returns why the controller can no longer work (a broken journal), or nil.
	Healthy() error
}

const maxBody = 1 << 20

// Handler returns the API's HTTP handler.
func Handler(c Controller, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathAssign, post(log, c.Assign))
	mux.HandleFunc("POST "+api.PathRelease, post(log, c.Release))
	mux.HandleFunc("POST "+api.PathCheck, post(log, c.Check))
	mux.HandleFunc("POST "+api.PathGC, post(log, c.GC))
	mux.HandleFunc("GET "+api.PathAssignments, func(w http.ResponseWriter, r *http.Request) {
		reply(w, log, c.Assignments(), nil)
	})
	mux.HandleFunc("GET "+api.PathStatus, func(w http.ResponseWriter, r *http.Request) {
		reply(w, log, c.Status(), nil)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeBadRequest, Message: "no endpoint " + r.Method + " " + r.URL.Path})
	})
	return mux
}

// post serves a JSON request with call: a malformed body is a bad request, call's error becomes the API error.
func post[Req, Resp any](log *slog.Logger, call func(context.Context, Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if decode(w, r, &req) {
			out, err := call(r.Context(), req)
			reply(w, log, out, err)
		}
	}
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBadRequest, Message: "decoding request: " + err.Error()})
		return false
	}
	return true
}

func reply(w http.ResponseWriter, log *slog.Logger, v any, err error) {
	if err != nil {
		status, ae := toAPIError(err)
		if status >= 500 {
			log.Error("API request failed", "error", err)
		}
		writeError(w, status, ae)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func toAPIError(err error) (int, *api.Error) {
	switch {
	case errors.Is(err, controller.ErrNoIP):
		return http.StatusServiceUnavailable, &api.Error{Code: api.CodeNoIPAvailable, Message: err.Error(), Retryable: true}
	case errors.Is(err, controller.ErrMaxPods):
		return http.StatusServiceUnavailable, &api.Error{Code: api.CodeMaxPods, Message: err.Error(), Retryable: true}
	case errors.Is(err, controller.ErrNotReady):
		return http.StatusServiceUnavailable, &api.Error{Code: api.CodeNotReady, Message: err.Error(), Retryable: true}
	case errors.Is(err, dptypes.ErrHostVethGone):
		return http.StatusServiceUnavailable, &api.Error{Code: api.CodeHostVethGone, Message: err.Error(), Retryable: true}
	case errors.Is(err, controller.ErrNotFound):
		return http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Message: err.Error()}
	case errors.Is(err, controller.ErrBadRequest):
		return http.StatusBadRequest, &api.Error{Code: api.CodeBadRequest, Message: err.Error()}
	}
	return http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: err.Error(), Retryable: true}
}

func writeError(w http.ResponseWriter, status int, e *api.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}

// ListenSocket opens the unix socket at path with mode 0600, replacing a stale socket file. The socket never
// exists at path with another mode, whatever the umask: it is bound inside a private directory (0700), given
// its mode there, and only then renamed into place. Closing the listener removes the socket.
func ListenSocket(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	private, err := os.MkdirTemp(dir, ".sock-")
	if err != nil {
		return nil, fmt.Errorf("creating a private directory for the socket: %w", err)
	}
	defer os.RemoveAll(private)
	bound := filepath.Join(private, "s")
	l, err := net.Listen("unix", bound)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(bound, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("setting mode of %s: %w", path, err)
	}
	if err := os.Rename(bound, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("moving the socket to %s: %w", path, err)
	}
	return &socketListener{UnixListener: ul, path: path}, nil
}

// socketListener removes its socket file when closed, as a listener bound in place would.
type socketListener struct {
	*net.UnixListener
	path string
}

func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = fmt.Errorf("removing socket %s: %w", l.path, rerr)
	}
	return err
}

// OpsHandler serves /metrics, /healthz (the controller can work: its journal takes writes) and /readyz
// (journal replayed and EC2 answered).
func OpsHandler(c Controller, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := c.Healthy(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ok, why := c.Ready(); !ok {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return mux
}

// Serve serves h on l until ctx ends, then shuts down gracefully. A client has 10 s to send a request's
// headers, and a keep-alive connection idle for 2 minutes is closed: neither a slow nor an idle client holds
// a connection (and its goroutine) for ever.
func Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}
