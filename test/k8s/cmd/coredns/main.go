// Command coredns is CoreDNS, built from github.com/coredns/coredns with the plugins the test cluster's
// Corefile uses (cluster DNS as kubeadm deploys it, less forwarding: the simulated VPC has no resolver), and
// hosts, which the e2e suite's DNS specs configure in the /coredns of agnhost's image.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
