// Command demo runs eniwire on a simulated VPC and shows it to a person: the simulator and the fabric in
// network namespaces, the agent on a simulated m5.large node, pods created through the CNI plugin via
// libcni, traffic and the ENI it leaves through, eniwirectl, bpftool and metrics, then a kill -9 of the
// agent in the middle of an ENI allocation under EC2 throttling, the books checked against EC2 after the
// restart, and prefix delegation turned on (a pod on an address of a /28 prefix, a row per prefix in
// eniwirectl enis). It removes everything it made on every exit path. Run it as root: `sudo make demo`.
//
//	DEMO_KEEP=1   stay up after the story for exploring (Ctrl-C removes everything)
//	-clean        remove what a killed demo left behind (by the name prefix "ewdemo-")
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/eniwire/eniwire/test/simnode"
)

// prefix names every netns and scratch dir of the demo, so -clean finds them.
const prefix = "ewdemo-"

func main() {
	clean := flag.Bool("clean", false, "remove what a killed demo left behind (netns, links, bpffs pins, agent, files) and exit")
	bin := flag.String("bin", "", "directory with eniwire-agent, eniwire and eniwirectl (default: build them)")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: needs root (network namespaces, BPF, bpffs mounts); run `sudo make demo`")
		os.Exit(2)
	}
	if *clean {
		removed, err := simnode.Cleanup(prefix, "")
		for _, r := range removed {
			fmt.Println("removed", r)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo -clean:", err)
			os.Exit(1)
		}
		fmt.Printf("demo -clean: %d leftovers removed\n", len(removed))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	keep := os.Getenv("DEMO_KEEP") == "1"
	os.Exit(run(ctx, os.Stdout, config{bin: *bin, keep: keep}))
}

type config struct {
	bin  string
	keep bool
	// name overrides the netns and scratch-dir prefix (tests).
	name string
	// res, when set, receives what the story established (tests).
	res *result
}

// run plays the story and cleans up, and returns the exit code. A panic is cleaned up after too.
func run(ctx context.Context, out io.Writer, cfg config) (code int) {
	start := time.Now()
	s := newScreen(out)
	var n *simnode.Node
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(out, "\ndemo: FAILED: panic: %v\n%s", r, debug.Stack())
			code = 2
		}
		if n != nil {
			s.heading("Removing everything the demo made")
			if err := n.Close(); err != nil {
				fmt.Fprintf(out, "   cleanup: %v\n   run `sudo go run ./test/demo -clean` to remove what is left\n", err)
				if code == 0 {
					code = 1
				}
			} else {
				s.say("namespaces, links, bpffs pins, agent state, sockets and files of %s removed", n.Name)
			}
		}
		verdict := map[int]string{0: "done", 130: "interrupted, cleaned up"}[code]
		if verdict == "" {
			verdict = "FAILED"
		}
		fmt.Fprintf(out, "\ndemo: %s in %s\n", verdict, time.Since(start).Round(100*time.Millisecond))
	}()

	name := cfg.name
	if name == "" {
		name = fmt.Sprintf("%s%04x", prefix, rand.N(0x10000))
	}
	opts := simnode.Options{Name: name, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		AgentEnv: []string{"WARM_IP_TARGET=2", "ENIWIRE_LOG_FORMAT=text"}}
	if cfg.bin != "" {
		b, err := simnode.FindBinaries(cfg.bin)
		if err != nil {
			fmt.Fprintf(out, "demo: FAILED: %v (run `make build`, or leave -bin out to build)\n", err)
			return 1
		}
		opts.Binaries = b
	}
	var err error
	if n, err = simnode.New(ctx, opts); err != nil {
		fmt.Fprintf(out, "demo: FAILED: setting up the simulated node: %v\n", err)
		return 1
	}
	st := &story{n: n, s: s}
	defer st.closeEchoes()
	if cfg.res != nil {
		defer func() { *cfg.res = st.res }()
	}
	if err := st.run(ctx); err != nil {
		s.endProgress()
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return 130
		}
		fmt.Fprintf(out, "\ndemo: FAILED: %v\n   agent log (tail):\n%s\n", err, indent(n.Agent.LogTail(25)))
		return 1
	}
	if cfg.keep {
		s.heading("DEMO_KEEP=1: everything stays up until Ctrl-C")
		st.explore()
		<-ctx.Done()
	}
	return 0
}

func indent(s string) string { return "     " + strings.ReplaceAll(s, "\n", "\n     ") }
