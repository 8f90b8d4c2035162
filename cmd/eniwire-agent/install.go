package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/eniwire/eniwire/controller/cniinstall"
	"github.com/eniwire/eniwire/datapath/nodenet"
)

// installOptions are the CNI install's options from the settings; the conflist is read when installing.
func (s *settings) installOptions(log *slog.Logger) cniinstall.Options {
	return cniinstall.Options{PluginSrc: s.cniPlugin, HostBinDir: s.cniBinDir, HostConfDir: s.cniConfDir, Logger: log}
}

// readiness is what installWhenReady waits on; *controller.Node is one.
type readiness interface {
	Ready() (bool, string)
}

// installWhenReady installs the plugin and the conflist once the node can serve pods: the runtime reports
// the node's network ready as soon as the conflist appears. A failed install (a hostPath not mounted, a
// read-only directory) is logged and retried; it does not stop the agent, which keeps serving the pods it
// has. An empty bin dir disables the install.
func installWhenReady(ctx context.Context, s *settings, node readiness, log *slog.Logger) error {
	if s.cniBinDir == "" {
		log.Info("CNI install disabled")
		return nil
	}
	const poll, retry = 100 * time.Millisecond, 10 * time.Second
	for {
		if ok, _ := node.Ready(); ok {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
	var last string
	for {
		err := installOnce(ctx, s, log)
		if err == nil {
			log.Info("CNI plugin and conflist installed", "bin_dir", s.cniBinDir, "conf_dir", s.cniConfDir)
			return nil
		}
		if err.Error() != last {
			log.Error("installing the CNI plugin failed; retrying", "error", err, "every", retry.String())
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

func installOnce(ctx context.Context, s *settings, log *slog.Logger) error {
	conflist, err := os.ReadFile(s.cniConflist)
	if err != nil {
		return fmt.Errorf("reading the conflist to install: %w", err)
	}
	o := s.installOptions(log)
	o.Conflist = conflist
	return cniinstall.Install(ctx, o)
}

// uninstall removes eniwire from the node: the conflist and plugin first (the runtime stops scheduling
// pods onto the network), then the SNAT rule, then the programs and the pinned maps. Run it only when
// eniwire leaves the node for good: pods still running lose their network.
func uninstall(ctx context.Context, s *settings, log *slog.Logger) error {
	var errs []error
	if s.cniBinDir != "" {
		errs = append(errs, cniinstall.Uninstall(ctx, s.installOptions(log)))
	}
	errs = append(errs, nodenet.Uninstall(ctx, s.pinRoot, log))
	return errors.Join(errs...)
}
