package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// ServerOptions say where a Server listens. Zero values listen on 127.0.0.1 with a free port.
type ServerOptions struct {
	// EC2Listener and AdminListener, when set, are used instead of listening on EC2Addr / AdminAddr.
	EC2Listener, AdminListener net.Listener
	EC2Addr, AdminAddr         string
	// IMDSListen opens the IMDS listener of an instance (e.g. 169.254.169.254:80 inside a node's network
	// namespace). Default: 127.0.0.1:0.
	IMDSListen func(instanceID string) (net.Listener, error)
	// EagerIMDS opens an IMDS listener for every instance as it is added, instead of on first IMDSURL.
	EagerIMDS bool
	Logger    *slog.Logger
}

// Server serves one Sim over HTTP: the EC2 API, the admin API, and one IMDS listener per instance.
type Server struct {
	sim              *Sim
	opts             ServerOptions
	log              *slog.Logger
	ec2              *http.Server
	admin            *http.Server
	ec2URL, adminURL string

	mu     sync.Mutex
	closed bool
	imds   map[string]string
	extra  []*http.Server
}

// Start listens and serves until ctx ends or Close is called.
func Start(ctx context.Context, s *Sim, opts ServerOptions) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = s.log
	}
	srv := &Server{sim: s, opts: opts, log: opts.Logger, imds: map[string]string{}}
	ec2ln, err := listenOr(opts.EC2Listener, opts.EC2Addr)
	if err != nil {
		return nil, fmt.Errorf("listening for EC2: %w", err)
	}
	adminln, err := listenOr(opts.AdminListener, opts.AdminAddr)
	if err != nil {
		_ = ec2ln.Close()
		return nil, fmt.Errorf("listening for admin: %w", err)
	}
	srv.ec2 = srv.serve(ec2ln, s.EC2Handler())
	srv.admin = srv.serve(adminln, s.AdminHandler())
	srv.ec2URL = "http://" + ec2ln.Addr().String()
	srv.adminURL = "http://" + adminln.Addr().String()
	s.mu.Lock()
	s.imdsURL = srv.IMDSURL
	if opts.EagerIMDS {
		s.onInstance = append(s.onInstance, func(i Instance) { srv.IMDSURL(i.ID) })
	}
	var existing []string
	for id := range s.instances {
		existing = append(existing, id)
	}
	s.mu.Unlock()
	if opts.EagerIMDS {
		for _, id := range existing {
			srv.IMDSURL(id)
		}
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return srv, nil
}

func listenOr(ln net.Listener, addr string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

func (srv *Server) serve(ln net.Listener, h http.Handler) *http.Server {
	// IMDSConnContext gives IMDS's token answers their hop limit; the other handlers ignore it.
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnContext: IMDSConnContext}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			srv.log.Warn("serving stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return hs
}

// Sim is the simulator behind the server.
func (srv *Server) Sim() *Sim { return srv.sim }

// EC2URL is the base endpoint of the EC2 API.
func (srv *Server) EC2URL() string { return srv.ec2URL }

// AdminURL is the base URL of the admin API.
func (srv *Server) AdminURL() string { return srv.adminURL }

// IMDSURL returns the IMDS endpoint of an instance, opening its listener on first use. It returns ""
// when the listener cannot be opened or the server is closed.
func (srv *Server) IMDSURL(instanceID string) string {
	u, err := srv.OpenIMDS(instanceID)
	if err != nil {
		srv.log.Warn("opening IMDS listener", "instance", instanceID, "err", err)
	}
	return u
}

// OpenIMDS is IMDSURL with the error.
func (srv *Server) OpenIMDS(instanceID string) (string, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if u, ok := srv.imds[instanceID]; ok {
		return u, nil
	}
	if srv.closed {
		return "", net.ErrClosed
	}
	listen := srv.opts.IMDSListen
	if listen == nil {
		listen = func(string) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
	}
	ln, err := listen(instanceID)
	if err != nil {
		return "", fmt.Errorf("opening IMDS listener for %s: %w", instanceID, err)
	}
	srv.extra = append(srv.extra, srv.serve(ln, srv.sim.IMDSHandler(instanceID)))
	u := "http://" + ln.Addr().String()
	srv.imds[instanceID] = u
	return u, nil
}

// ServeIMDS serves an instance's IMDS on a listener the caller opened (e.g. inside a network namespace).
func (srv *Server) ServeIMDS(instanceID string, ln net.Listener) error {
	return srv.serveExtra(ln, srv.sim.IMDSHandler(instanceID))
}

// ServeEC2 serves the EC2 API on one more listener (e.g. an endpoint inside a node's namespace).
func (srv *Server) ServeEC2(ln net.Listener) error { return srv.serveExtra(ln, srv.sim.EC2Handler()) }

func (srv *Server) serveExtra(ln net.Listener, h http.Handler) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.closed {
		_ = ln.Close()
		return net.ErrClosed
	}
	srv.extra = append(srv.extra, srv.serve(ln, h))
	return nil
}

// Close stops every listener.
func (srv *Server) Close() {
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		return
	}
	srv.closed = true
	all := append([]*http.Server{srv.ec2, srv.admin}, srv.extra...)
	srv.mu.Unlock()
	srv.sim.mu.Lock()
	srv.sim.imdsURL = nil
	srv.sim.mu.Unlock()
	for _, hs := range all {
		_ = hs.Close()
	}
}
