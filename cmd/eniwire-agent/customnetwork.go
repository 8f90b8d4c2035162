package main

import (
	"context"
	"log/slog"

	"k8s.io/klog/v2"

	"github.com/eniwire/eniwire/controller/eniconfig"
	"github.com/eniwire/eniwire/controller/subnet"
)

// startENIConfigs starts the watches of the node and the ENIConfigs that custom networking reads; client-go's
// own log lines go to the agent's logger.
func (s *settings) startENIConfigs(ctx context.Context, log *slog.Logger) (subnet.ENIConfigSource, error) {
	klog.SetSlogLogger(log.With("component", "client-go"))
	src, err := eniconfig.New(eniconfig.Config{
		NodeName: s.nodeName, Label: s.eniConfigLabel, Annotation: s.eniConfigAnnotation,
		Kubeconfig: s.kubeconfig, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	src.Start(ctx)
	log.Info("custom networking", "node", s.nodeName, "label", s.eniConfigLabel, "annotation", s.eniConfigAnnotation)
	return src, nil
}
