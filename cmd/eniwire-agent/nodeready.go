package main

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/nodeready"
)

// nodeReporter builds the keeper of this Node's eniwire.io/IPAMReady condition and startup taint, reading the
// agent's status; nil when the node has no name in Kubernetes (the agent runs outside it).
func (s *settings) nodeReporter(status func() *api.Status, log *slog.Logger) (*nodeready.Reporter, error) {
	if s.nodeName == "" {
		return nil, nil
	}
	// Empty paths: the in-cluster configuration.
	rc, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the Kubernetes API configuration: %w", err)
	}
	rc.UserAgent = "eniwire-agent"
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes API client: %w", err)
	}
	return nodeready.New(nodeready.Config{Nodes: nodeready.DynamicNodes(client), NodeName: s.nodeName, Status: status, Logger: log})
}
