package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/eniwire/eniwire/controller/eniconfig"
	"github.com/eniwire/eniwire/controller/podsg"
	"github.com/eniwire/eniwire/controller/policywatch"
)

// The values of POD_SECURITY_GROUP_ENFORCING_MODE, the AWS VPC CNI's.
const (
	podSGStrict   = "strict"
	podSGStandard = "standard"
)

// checkPodENI refuses ENABLE_POD_ENI where it cannot work: without the node's name (its pods are watched by
// it), outside IPv4 mode (every IPv6 pod's address is of the primary ENI's /80, whose groups are the
// node's), with a mode other than strict or standard, and strict mode without the bpf datapath (only its
// programs send a pod's packets to the node's other pods through the VPC).
func (s *settings) checkPodENI() error {
	switch s.podSGMode = strings.ToLower(strings.TrimSpace(s.podSGMode)); {
	case s.podSGMode != podSGStrict && s.podSGMode != podSGStandard:
		return fmt.Errorf("--pod-security-group-enforcing-mode (POD_SECURITY_GROUP_ENFORCING_MODE): %q is neither strict nor standard", s.podSGMode)
	case !s.podENI:
		return nil
	case s.nodeName == "":
		return errors.New("--enable-pod-eni (ENABLE_POD_ENI) needs --node-name (MY_NODE_NAME): the agent decides each pod's security groups from the SecurityGroupPolicies that select it")
	case s.ipv6:
		return errors.New("--enable-pod-eni (ENABLE_POD_ENI) works in IPv4 mode only: with ENABLE_IPv6 every pod's address is of the primary ENI's /80, whose groups are the node's")
	case s.podSGMode == podSGStrict && s.datapath != "bpf":
		return fmt.Errorf("POD_SECURITY_GROUP_ENFORCING_MODE=strict needs the bpf datapath (ENIWIRE_DATAPATH is %q): only its programs send a pod's packets to the node's other pods through the VPC; use standard", s.datapath)
	}
	return nil
}

// newPodSecurityGroups builds the SecurityGroupPolicy watch that decides each pod's security-group set at
// ADD; client-go's own log lines go to the agent's logger.
func (s *settings) newPodSecurityGroups(reg prometheus.Registerer, log *slog.Logger) (*podsg.Watcher, error) {
	klog.SetSlogLogger(log.With("component", "client-go"))
	client, err := policywatch.NewClient(s.kubeconfig)
	if err != nil {
		return nil, err
	}
	dyn, err := eniconfig.NewClient(s.kubeconfig)
	if err != nil {
		return nil, err
	}
	log.Info("security groups for pods", "node", s.nodeName, "mode", s.podSGMode)
	_ = reg
	return podsg.New(podsg.Config{NodeName: s.nodeName, Client: client, Dynamic: dyn, Logger: log})
}
