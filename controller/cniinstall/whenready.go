package cniinstall

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// WhenReady installs the plugin and the conflist read from conflistPath once ready says the agent can serve
// pods: the runtime reports the node's network ready as soon as the conflist appears. A failed install (a
// hostPath not mounted, a read-only directory) is logged and retried; it does not stop the agent, which keeps
// serving the pods it has. An empty o.HostBinDir disables the install. It returns nil when it installed or
// when ctx ends.
func WhenReady(ctx context.Context, o Options, conflistPath string, ready func() (bool, string)) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.HostBinDir == "" {
		log.Info("CNI install disabled")
		return nil
	}
	const poll, retry = 100 * time.Millisecond, 10 * time.Second
	for {
		if ok, _ := ready(); ok {
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
		err := installFrom(ctx, o, conflistPath)
		if err == nil {
			log.Info("CNI plugin and conflist installed", "bin_dir", o.HostBinDir, "conf_dir", o.HostConfDir)
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

// installFrom reads the conflist at path and installs it with the plugin.
func installFrom(ctx context.Context, o Options, path string) error {
	conflist, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the conflist to install: %w", err)
	}
	o.Conflist = conflist
	return Install(ctx, o)
}
