package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/eniwire/eniwire/controller/policywatch"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// enforcesNetworkPolicy says whether the agent enforces NetworkPolicy: with the bpf datapath, unless
// ENABLE_NETWORK_POLICY is false (then no watch, no gate, no forward hook: every flow allowed).
func (s *settings) enforcesNetworkPolicy() bool { return s.networkPolicy && s.datapath == "bpf" }

// newNetworkPolicy builds the NetworkPolicy watch that writes the node's pods' state through driver; client-go's
// own log lines go to the agent's logger.
func (s *settings) newNetworkPolicy(driver dptypes.PolicyDriver, reg prometheus.Registerer, log *slog.Logger) (*policywatch.Watcher, error) {
	klog.SetSlogLogger(log.With("component", "client-go"))
	client, err := policywatch.NewClient(s.kubeconfig)
	if err != nil {
		return nil, err
	}
	log.Info("network policy enforced", "node", s.nodeName)
	return policywatch.New(policywatch.Config{NodeName: s.nodeName, Client: client, Driver: driver, Registerer: reg, Logger: log})
}
