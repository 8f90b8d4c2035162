package simnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

// Echo is a TCP and UDP echo server inside a netns. A TCP connection first gets the peer address the
// server sees ("ip:port\n"), then every line back; a UDP datagram comes back prefixed with the peer address.
type Echo struct {
	Addr netip.AddrPort
	tcp  net.Listener
	udp  net.PacketConn
}

// network is proto ("tcp" or "udp") of ip's family: "tcp4", "udp6".
func network(proto string, ip netip.Addr) string {
	if ip.Is4() {
		return proto + "4"
	}
	return proto + "6"
}

// StartEcho serves TCP and UDP echo on addr inside the namespace at nsPath until Close.
func StartEcho(nsPath string, addr netip.AddrPort) (*Echo, error) {
	l, err := vpcfabric.Listen(nsPath, network("tcp", addr.Addr()), addr.String())
	if err != nil {
		return nil, fmt.Errorf("listening on tcp %s: %w", addr, err)
	}
	var pc net.PacketConn
	if err := vpcfabric.Do(nsPath, func() error {
		var err error
		pc, err = net.ListenPacket(network("udp", addr.Addr()), addr.String())
		return err
	}); err != nil {
		l.Close()
		return nil, fmt.Errorf("listening on udp %s: %w", addr, err)
	}
	e := &Echo{Addr: addr, tcp: l, udp: pc}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "%s\n", c.RemoteAddr())
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %s", from, buf[:k]), from)
		}
	}()
	return e, nil
}

// Close stops both servers.
func (e *Echo) Close() error { return errors.Join(e.tcp.Close(), e.udp.Close()) }

// Conn is a TCP connection from a netns to an Echo, with the source address the server saw.
type Conn struct {
	c    net.Conn
	r    *bufio.Reader
	Seen netip.AddrPort
}

// Dial connects from the namespace at nsPath to an Echo at dst and reads its greeting.
func Dial(ctx context.Context, nsPath string, dst netip.AddrPort) (*Conn, error) {
	d, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := vpcfabric.DialContext(nsPath)(d, network("tcp", dst.Addr()), dst.String())
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", dst, err)
	}
	out := &Conn{c: c, r: bufio.NewReader(c)}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := out.r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading the greeting of %s: %w", dst, err)
	}
	if out.Seen, err = netip.ParseAddrPort(strings.TrimSpace(line)); err != nil {
		c.Close()
		return nil, fmt.Errorf("parsing the greeting %q: %w", line, err)
	}
	return out, nil
}

// Exchange sends one line and checks that it comes back.
func (c *Conn) Exchange(msg string) error {
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c.c, "%s\n", msg); err != nil {
		return fmt.Errorf("sending %q: %w", msg, err)
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the echo of %q: %w", msg, err)
	}
	if strings.TrimSpace(got) != msg {
		return fmt.Errorf("echo of %q came back as %q", msg, got)
	}
	return nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Talk opens a TCP connection from the namespace at nsPath to an Echo at dst, exchanges n lines and returns
// the source address the server saw.
func Talk(ctx context.Context, nsPath string, dst netip.AddrPort, n int) (netip.Addr, error) {
	c, err := Dial(ctx, nsPath, dst)
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	for i := range n {
		if err := c.Exchange(fmt.Sprintf("line-%d", i)); err != nil {
			return netip.Addr{}, fmt.Errorf("talking to %s: %w", dst, err)
		}
	}
	return c.Seen.Addr(), nil
}

// TalkUDP sends one datagram from the namespace at nsPath to an Echo at dst and returns the source address
// the server saw.
func TalkUDP(ctx context.Context, nsPath string, dst netip.AddrPort) (netip.Addr, error) {
	var c net.Conn
	if err := vpcfabric.Do(nsPath, func() error {
		var err error
		c, err = net.Dial(network("udp", dst.Addr()), dst.String())
		return err
	}); err != nil {
		return netip.Addr{}, fmt.Errorf("dialing udp %s: %w", dst, err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	// UDP may lose the first datagram while the router resolves neighbours: try a few times.
	for range 5 {
		if err := ctx.Err(); err != nil {
			return netip.Addr{}, err
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			return netip.Addr{}, fmt.Errorf("sending udp to %s: %w", dst, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		k, err := c.Read(buf)
		if err != nil {
			continue
		}
		from, _, _ := strings.Cut(string(buf[:k]), " ")
		seen, err := netip.ParseAddrPort(from)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("parsing the udp echo %q: %w", buf[:k], err)
		}
		return seen.Addr(), nil
	}
	return netip.Addr{}, fmt.Errorf("udp to %s: no echo after 5 tries", dst)
}

// Flow is a long-lived TCP connection exchanging a line every 20ms until stopped, to show that established
// connections survive what happens to the agent.
type Flow struct {
	mu   sync.Mutex
	n    int
	err  error
	done chan struct{}
	quit chan struct{}
	once sync.Once
}

// StartFlow connects from nsPath to an Echo at dst and keeps exchanging lines.
func StartFlow(ctx context.Context, nsPath string, dst netip.AddrPort) (*Flow, error) {
	c, err := Dial(ctx, nsPath, dst)
	if err != nil {
		return nil, err
	}
	f := &Flow{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer c.Close()
		for i := 0; ; i++ {
			select {
			case <-f.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			err := c.Exchange(fmt.Sprintf("flow-%d", i))
			f.mu.Lock()
			if err != nil {
				f.err = err
			} else {
				f.n++
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return f, nil
}

// Count is how many exchanges succeeded so far.
func (f *Flow) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// WaitMore waits until k more exchanges have succeeded; it fails when the flow broke or ctx ends.
func (f *Flow) WaitMore(ctx context.Context, k int) error {
	target := f.Count() + k
	for {
		f.mu.Lock()
		n, err := f.n, f.err
		f.mu.Unlock()
		if n >= target {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the flow broke after %d exchanges: %w", n, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the flow stalled at %d exchanges: %w", n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Stop ends the flow and returns why it broke, if it did.
func (f *Flow) Stop() error {
	f.once.Do(func() { close(f.quit) })
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
