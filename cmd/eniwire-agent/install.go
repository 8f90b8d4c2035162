package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/eniwire/eniwire/controller/cniinstall"
	"github.com/eniwire/eniwire/datapath/nodenet"
)

// installOptions are the CNI install's options from the settings; the conflist is read when installing.
func (s *settings) installOptions(log *slog.Logger) cniinstall.Options {
	return cniinstall.Options{PluginSrc: s.cniPlugin, HostBinDir: s.cniBinDir, HostConfDir: s.cniConfDir, Logger: log}
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
