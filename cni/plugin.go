package cni

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/internal/version"
)

// Agent is the part of the agent API the plugin calls; *api.Client satisfies it. Errors are *api.Error or wrap
// api.ErrUnreachable, as the client documents.
type Agent interface {
	// SendAssign sends an Assign request; its Answer waits for the agent's answer.
	SendAssign(ctx context.Context, req api.AssignRequest) *api.PendingAssign
	Release(ctx context.Context, req api.ReleaseRequest) (*api.ReleaseResponse, error)
	Check(ctx context.Context, req api.CheckRequest) (*api.Assignment, error)
	Status(ctx context.Context) (*api.Status, error)
	GC(ctx context.Context, req api.GCRequest) (*api.GCResponse, error)
}

// Plugin runs CNI commands. Its fields are the dependencies a test may replace; the zero value is not usable,
// call New.
type Plugin struct {
	// Dial returns the agent behind a socket path.
	Dial func(socket string) Agent
	// Stdout receives the CNI result; Stderr the log when the config names no log file.
	Stdout io.Writer
	Stderr io.Writer
}

// New returns the plugin as the binary runs it: the real agent client, the process's stdout and stderr.
func New() *Plugin {
	return &Plugin{
		Dial:   func(socket string) Agent { return api.NewClient(socket) },
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	}
}

// About is what the binary prints when run by hand.
func About() string { return "eniwire CNI plugin " + version.Version }

// Funcs binds the plugin's commands for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status, GC: p.GC}
}

// invocation is what every command starts from: the parsed config, a logger, the agent and a deadline.
type invocation struct {
	conf   *Conf
	log    *slog.Logger
	agent  Agent
	ctx    context.Context
	cancel context.CancelFunc
	close  func()
}

func (p *Plugin) start(cmd string, args *skel.CmdArgs) (*invocation, error) {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return nil, err
	}
	logger, closeLog := openLog(conf, p.Stderr)
	logger = logger.With("cmd", cmd)
	if args.ContainerID != "" {
		logger = logger.With("containerID", args.ContainerID, "ifName", args.IfName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), conf.timeout)
	return &invocation{
		conf: conf, log: logger, agent: p.Dial(conf.AgentSocket),
		ctx: ctx, cancel: cancel, close: closeLog,
	}, nil
}

func (inv *invocation) done() {
	inv.cancel()
	inv.close()
}
