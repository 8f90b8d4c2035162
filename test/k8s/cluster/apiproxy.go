package cluster

import (
	"context"
	"io"
	"net"
	"sync"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

// apiProxy forwards a loopback port of the machine to the API server inside the control-plane node's
// network namespace, so kubectl and client-go on the machine reach the cluster and nothing listens outside
// loopback. The API server's certificate names 127.0.0.1.
type apiProxy struct {
	ln   net.Listener
	wg   sync.WaitGroup
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	to   string
}

func startAPIProxy(netnsPath, to string) (*apiProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &apiProxy{ln: ln, dial: vpcfabric.DialContext(netnsPath), to: to}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is host:port on loopback.
func (p *apiProxy) Addr() string { return p.ln.Addr().String() }

func (p *apiProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := p.dial(context.Background(), "tcp", p.to)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

func (p *apiProxy) Close() error {
	err := p.ln.Close()
	p.wg.Wait()
	return err
}
