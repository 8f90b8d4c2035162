// Package fleet replays, at the scale of a cluster, the rollout that broke the AWS VPC CNI in 2019
// (docs/ec2-facts.md, "The AWS VPC CNI, as the benchmarks model it"): hundreds of real node controllers, each
// with its own journal, against one simulated account with AWS's default throttling, on virtual time, side by side with a legacy node
// strategy that behaves like the seed's AllocENI; and, in prefix mode, a rollout of nodes with their pods and one
// into subnets that single IPs have fragmented, side by side with a model of the AWS VPC CNI's prefix mode.
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/internal/clock"
	"github.com/eniwire/eniwire/test/ec2sim"
)

// instanceMix is the rollout's mix of instance types, cycled over the nodes. m4.4xlarge is the seed's type.
var instanceMix = []string{"m5.large", "m5.xlarge", "c5.xlarge", "t3.medium", "m5.2xlarge", "m4.4xlarge"}

// prefixMix is the mix of the prefix scenarios: Nitro types only, each with kubelet's 110 max pods in prefix
// mode (t3.medium's 3 ENIs x 5 slots need a second ENI for 7 prefixes; the others fit them on the primary).
var prefixMix = []string{"m5.large", "m5.xlarge", "c5.xlarge", "t3.medium", "m5.2xlarge"}

// nodesPerSubnet keeps every subnet (a /16) far from full even when the legacy strategy leaks.
const nodesPerSubnet = 200

// attachDelay is how long the simulator keeps an attachment "attaching" (and a detachment "detaching").
const attachDelay = time.Second

// world is one simulated account: the simulator, its HTTP server, and the shared pieces every node client uses.
type world struct {
	sim *ec2sim.Sim
	srv *ec2sim.Server
	clk *pacedClock
	// pacer sets clk's pace by the work outstanding (pacer.go); nil when the run keeps a fixed speed-up.
	pacer   *pacer
	http    *http.Client
	subnets []string
	mix     []string
	cancel  context.CancelFunc
	// describes counts the nodes' DescribeNetworkInterfaces requests by cause (describecauses.go).
	describes *describeCauses
}

// newWorld builds the account: /16 subnets of nodesPerSubnet nodes, whose addresses are handed out across
// each subnet, as EC2 does, when scatter is set. Its virtual time runs at speedup, paced by the work
// outstanding unless fixedPace is set.
func newWorld(speedup float64, fixedPace bool, seed int64, nodes int, mix []string, scatter bool) (*world, error) {
	clk := newPacedClock(speedup)
	cfg := ec2sim.DefaultConfig()
	cfg.Clock = clk
	cfg.Seed = seed
	cfg.AttachDelay, cfg.DetachDelay = attachDelay, attachDelay
	sim := ec2sim.New(cfg)
	if err := sim.AddVPC("vpc-fleet", "10.0.0.0/8"); err != nil {
		return nil, fmt.Errorf("adding VPC: %w", err)
	}
	w := &world{sim: sim, clk: clk, mix: mix, describes: newDescribeCauses()}
	for i := 0; i*nodesPerSubnet < max(nodes, 1)*2; i++ { // room for nodes that join during churn
		id := fmt.Sprintf("subnet-fleet%03d", i)
		if err := sim.AddSubnet(ec2sim.SubnetSpec{ID: id, VPCID: "vpc-fleet", CIDR: fmt.Sprintf("10.%d.0.0/16", i+1),
			AZ: "us-west-2a", Scatter: scatter}); err != nil {
			return nil, fmt.Errorf("adding subnet %s: %w", id, err)
		}
		w.subnets = append(w.subnets, id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := ec2sim.Start(ctx, sim, ec2sim.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	if !fixedPace {
		w.pacer = newPacer(clk)
		go w.pacer.run(ctx)
	}
	w.srv, w.cancel = srv, cancel
	// One transport for every node's SDK client: a thousand clients, a handful of pooled connections each.
	w.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        2048,
		MaxIdleConnsPerHost: 2048,
		IdleConnTimeout:     90 * time.Second,
	}}
	return w, nil
}

func (w *world) close() {
	w.cancel()
	w.srv.Close()
	w.http.CloseIdleConnections()
}

// addInstance launches the i-th node of the fleet.
func (w *world) addInstance(i int) (ec2sim.Instance, error) {
	spec := ec2sim.InstanceSpec{Type: w.mix[i%len(w.mix)], SubnetID: w.subnets[(i/nodesPerSubnet)%len(w.subnets)]}
	inst, err := w.sim.AddInstance(spec)
	if err != nil {
		return inst, fmt.Errorf("adding instance %d: %w", i, err)
	}
	return inst, nil
}

// sdk returns an SDK client for the simulator with the given retryer. Every strategy's client gives the
// transport its own copy of each request body (ec2client.OwnBodyHTTPClient), as eniwire's does: against a
// simulator on loopback the SDK's body race otherwise drops a connection under a reader once in a few dozen
// calls, and a fleet run makes thousands. Its describes are counted by cause; ready says whether the node has
// had EC2's first answer (nil: always).
func (w *world) sdk(retryer aws.Retryer, ready func() bool) *ec2.Client {
	return ec2.New(ec2.Options{
		Region:       w.sim.Config().Region,
		Credentials:  credentials.NewStaticCredentialsProvider(ec2sim.TestAccessKey, ec2sim.TestSecretKey, ""),
		BaseEndpoint: aws.String(w.srv.EC2URL()),
		HTTPClient:   ec2client.OwnBodyHTTPClient(w.describes.client(w.http, ready)),
		Retryer:      retryer,
	})
}

// scaledRetryer makes an SDK retryer's delays pass in virtual time: the SDK would sleep on the wall clock, so
// the delay is slept here on the virtual clock, whose pace may change meanwhile, and the SDK told to sleep no
// more. Attempts, retry quota and retryable errors stay the SDK's.
type scaledRetryer struct {
	aws.RetryerV2
	clk clock.Clock
}

func (r scaledRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, derr := r.RetryerV2.RetryDelay(attempt, err)
	if derr == nil {
		_ = r.clk.Sleep(context.Background(), d)
	}
	return 0, derr
}

// nopRegisterer drops metrics: a thousand private registries would cost more than the simulation of a node.
type nopRegisterer struct{}

func (nopRegisterer) Register(prometheus.Collector) error  { return nil }
func (nopRegisterer) MustRegister(...prometheus.Collector) {}
func (nopRegisterer) Unregister(prometheus.Collector) bool { return true }

// sleepCtx waits d of virtual time on clk; false when ctx ended.
func sleepCtx(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	return clk.Sleep(ctx, d) == nil
}

// runner runs one member's loop in a goroutine and can stop it.
type runner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *runner) start(parent context.Context, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	r.mu.Lock()
	r.cancel, r.done = cancel, done
	r.mu.Unlock()
	go func() { defer close(done); run(ctx) }()
}

func (r *runner) stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
