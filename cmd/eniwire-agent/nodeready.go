package main

import (
	"log/slog"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eniconfig"
	"github.com/eniwire/eniwire/controller/nodeready"
)

// nodeReporter builds the keeper of this Node's eniwire.io/IPAMReady condition and startup taint, reading the
// agent's status; nil when the node has no name in Kubernetes (the agent runs outside it).
func (s *settings) nodeReporter(status func() *api.Status, log *slog.Logger) (*nodeready.Reporter, error) {
	if s.nodeName == "" {
		return nil, nil
	}
	client, err := eniconfig.NewClient(s.kubeconfig)
	if err != nil {
		return nil, err
	}
	return nodeready.New(nodeready.Config{Nodes: nodeready.DynamicNodes(client), NodeName: s.nodeName, Status: status, Logger: log})
}
