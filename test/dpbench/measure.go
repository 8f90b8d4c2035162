package dpbench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eniwire/eniwire/internal/inetsum"
)

// Ports the VPC host serves on.
const (
	iperfPort = 5201
	echoPort  = 7007
)

// Target is where a measurement sends the pod's traffic: the VPC host itself, or a Service whose only
// backend is the VPC host (service.go).
type Target struct {
	Name     string         // as rows and JSON lines name it
	TCP, UDP netip.AddrPort // iperf3 -c and the UDP echo
}

// Direct is the VPC host's own servers; Direct6 the same over IPv6, in the IPv6 topology.
var (
	Direct  = Target{Name: "vpchost", TCP: netip.AddrPortFrom(VPCHostIP, iperfPort), UDP: netip.AddrPortFrom(VPCHostIP, echoPort)}
	Direct6 = Target{Name: "vpchost6", TCP: netip.AddrPortFrom(VPCHostIP6, iperfPort), UDP: netip.AddrPortFrom(VPCHostIP6, echoPort)}
)

// Servers are what runs in the VPC host: iperf3 -s, a UDP echo server, and the TCP servers of
// connect/request/close (crr.go) on crrPort and probePort.
type Servers struct {
	iperf *exec.Cmd
	echo  net.PacketConn
	done  chan struct{}
	crr   []*crrServer
}

// StartServers starts the servers in t's VPC host, on its IPv6 address in the IPv6 topology, and returns
// once they all listen.
func StartServers(ctx context.Context, t *Topology) (*Servers, error) {
	s := &Servers{done: make(chan struct{})}
	ip := t.serverIP()
	if err := t.Do(t.VPCHost, func() (err error) {
		s.echo, err = net.ListenPacket("udp", netip.AddrPortFrom(ip, echoPort).String())
		return err
	}); err != nil {
		return nil, fmt.Errorf("starting the UDP echo server: %w", err)
	}
	go func() {
		defer close(s.done)
		buf := make([]byte, 2048)
		for {
			n, from, err := s.echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = s.echo.WriteTo(buf[:n], from)
		}
	}()
	for _, port := range []uint16{crrPort, probePort} {
		var ln net.Listener
		if err := t.Do(t.VPCHost, func() (err error) {
			ln, err = net.Listen("tcp", netip.AddrPortFrom(ip, port).String())
			return err
		}); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("starting the TCP server on port %d: %w", port, err)
		}
		s.crr = append(s.crr, startCRRServer(ln))
	}
	s.iperf = exec.Command("ip", "netns", "exec", t.VPCHost, "iperf3", "-s", "-B", ip.String(),
		"-p", strconv.Itoa(iperfPort), "--forceflush")
	out, err := s.iperf.StdoutPipe()
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("starting iperf3 -s: %w", err)
	}
	if err := s.iperf.Start(); err != nil {
		s.iperf = nil
		_ = s.Close()
		return nil, fmt.Errorf("starting iperf3 -s: %w", err)
	}
	listening := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		told := false
		for sc.Scan() {
			if !told && strings.Contains(sc.Text(), "Server listening") {
				listening <- nil
				told = true
			}
		}
		if !told {
			listening <- errors.New("iperf3 -s exited before listening")
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case err = <-listening:
	case <-time.After(5 * time.Second):
		err = errors.New("iperf3 -s did not listen within 5s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("starting iperf3 -s: %w", err)
	}
	return s, nil
}

// Close stops both servers.
func (s *Servers) Close() error {
	var errs []error
	for _, c := range s.crr {
		errs = append(errs, c.Close())
	}
	if s.echo != nil {
		errs = append(errs, s.echo.Close())
		<-s.done
	}
	if s.iperf != nil && s.iperf.Process != nil {
		_ = s.iperf.Process.Kill() // the one process we started; `ip netns exec` execs iperf3 in place
		_ = s.iperf.Wait()
	}
	return errors.Join(errs...)
}

// TCPResult is one iperf3 run.
type TCPResult struct {
	Gbps        float64 // received by the VPC host
	Retransmits int
}

// TCPThroughput runs `iperf3 -c <to> -t <secs> -J -P 1` in the pod (with -6 to an IPv6 target). A server
// still closing the previous test answers "busy"; that is retried briefly.
func TCPThroughput(ctx context.Context, t *Topology, to Target, d time.Duration) (TCPResult, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	args := []string{"netns", "exec", t.Pod, "iperf3", "-c", to.TCP.Addr().String(),
		"-p", strconv.Itoa(int(to.TCP.Port())), "-t", secs, "-J", "-P", "1"}
	if to.TCP.Addr().Is6() {
		args = append(args, "-6")
	}
	var last error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return TCPResult{}, ctx.Err()
			}
		}
		out, err := exec.CommandContext(ctx, "ip", args...).Output()
		var rep struct {
			Error string `json:"error"`
			End   struct {
				SumSent struct {
					Retransmits int `json:"retransmits"`
				} `json:"sum_sent"`
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
			} `json:"end"`
		}
		if jerr := json.Unmarshal(out, &rep); jerr != nil {
			last = fmt.Errorf("running iperf3 -c: %v; output not JSON: %w", err, jerr)
			continue
		}
		if rep.Error != "" {
			last = fmt.Errorf("running iperf3 -c: %s", rep.Error)
			continue
		}
		if err != nil {
			last = fmt.Errorf("running iperf3 -c: %w", err)
			continue
		}
		return TCPResult{Gbps: rep.End.SumReceived.BitsPerSecond / 1e9, Retransmits: rep.End.SumSent.Retransmits}, nil
	}
	return TCPResult{}, last
}

// RRResult is one run of UDP ping-pong.
type RRResult struct {
	Transactions int
	Lost         int
	Rate         float64 // transactions per second
	P50, P99     time.Duration
}

// rrTimeout is how long one request waits for its answer before it counts as lost: far above the worst
// RTT measured here (~10 ms with 20,000 rules), short enough that a packet lost on a busy machine does not
// eat a large part of the run.
const rrTimeout = 50 * time.Millisecond

// UDPRoundTrips sends one 64-byte datagram at a time from the pod to the echo server at to and waits for
// its echo, for about d, then reports the rate and the RTT percentiles.
func UDPRoundTrips(ctx context.Context, t *Topology, to Target, d time.Duration) (RRResult, error) {
	conn, err := dialFromPod(t, to)
	if err != nil {
		return RRResult{}, err
	}
	defer conn.Close()
	req, resp := make([]byte, 64), make([]byte, 2048)
	rtts := make([]time.Duration, 0, 1<<16)
	lost := 0
	start := time.Now()
	end := start.Add(d)
	for seq := uint64(1); ; seq++ {
		now := time.Now()
		if !now.Before(end) || ctx.Err() != nil {
			break
		}
		binary.BigEndian.PutUint64(req, seq)
		if _, err := conn.Write(req); err != nil {
			return RRResult{}, fmt.Errorf("sending request %d: %w", seq, err)
		}
		_ = conn.SetReadDeadline(now.Add(rrTimeout))
		for {
			n, err := conn.Read(resp)
			if err != nil {
				lost++
				break
			}
			if n == len(req) && binary.BigEndian.Uint64(resp) == seq {
				rtts = append(rtts, time.Since(now))
				break
			}
			// A late echo of a request already counted lost: keep waiting for this one.
		}
	}
	elapsed := time.Since(start)
	if len(rtts) == 0 {
		return RRResult{Lost: lost}, fmt.Errorf("no UDP echo from %s in %s (%d lost)", to.UDP, d, lost)
	}
	slices.Sort(rtts)
	return RRResult{
		Transactions: len(rtts),
		Lost:         lost,
		Rate:         float64(len(rtts)) / elapsed.Seconds(),
		P50:          percentile(rtts, 50),
		P99:          percentile(rtts, 99),
	}, nil
}

func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// Reach waits until the pod gets an echo from the echo server at to, or within passes. The first packets
// wait on neighbour resolution.
func Reach(ctx context.Context, t *Topology, to Target, within time.Duration) error {
	conn, err := dialFromPod(t, to)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(within)
	msg, buf := []byte("dpbench reach"), make([]byte, 2048)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := conn.Write(msg); err != nil {
			last = err
			time.Sleep(50 * time.Millisecond) // ICMP errors surface as write errors; pace the retry
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
		n, err := conn.Read(buf)
		if err == nil && string(buf[:n]) == string(msg) {
			return nil
		}
		last = err
	}
	return fmt.Errorf("no echo from %s within %s: %v", to.UDP, within, last)
}

// dialFromPod opens a UDP socket inside the pod; it stays in that namespace whichever thread uses it.
func dialFromPod(t *Topology, to Target) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := t.Do(t.Pod, func() (err error) {
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to.UDP))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dialing %s from the pod: %w", to.UDP, err)
	}
	return conn, nil
}

// tcpFrame is an Ethernet + IPv4 + TCP header, what from_pod parses: the IPv4 header checksum is valid (a
// header that does not verify goes to the host), the TCP checksum is not looked at.
func tcpFrame(src, dst netip.Addr) []byte {
	pkt := make([]byte, 14+20+20)
	copy(pkt[0:6], []byte{0x02, 0, 0, 0, 0, 0x01})
	copy(pkt[6:12], []byte{0x02, 0, 0, 0, 0, 0x02})
	binary.BigEndian.PutUint16(pkt[12:], 0x0800)
	ip := pkt[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 40)
	ip[8] = 64
	ip[9] = 6 // TCP
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], iperfPort)
	tcp[12] = 5 << 4
	inetsum.SetIPv4Header(ip[:20])
	return pkt
}
