package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/controller/eniconfig"
	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/datapath/snat"
)

// settings are the agent's configuration: every one is an environment variable (the AWS VPC CNI's name where
// one exists) and a flag of the same meaning; a flag given on the command line wins.
type settings struct {
	stateDir, socket, metricsAddr, cluster, logLevel, logFormat, region, datapath string
	warmENI, warmIP, minIP, maxENI, maxPods, warmPrefix                           int
	prefixDelegation, subnetDiscovery, awsCNIMetrics, ipv4, ipv6, networkPolicy   bool
	cooldown, reconcile, maxReconcile, orphanSweep, poolInterval, releaseDelay    time.Duration
	gcGrace, jitter, addWait                                                      time.Duration
	clockFactor                                                                   float64
	journalSync                                                                   journal.SyncPolicy

	// BPF datapath (datapath/nodenet), SNAT and CNI install (install.go).
	pinRoot, sysctlRoot, serviceCIDRs, externalSNAT, excludeSNAT, randomizeSNAT string
	eniMTU                                                                      int
	cniBinDir, cniConfDir, cniConflist, cniPlugin                               string

	// Custom networking: the node's ENIConfig, read from the Kubernetes API (package eniconfig).
	customNetwork                                             bool
	nodeName, eniConfigLabel, eniConfigAnnotation, kubeconfig string

	// Security groups for pods (podsecuritygroups.go): the SecurityGroupPolicy watch, and its mode.
	podENI    bool
	podSGMode string
}

// The MTUs a VPC carries: IPv4's minimum and EC2's jumbo frames.
const (
	minMTU = 576
	maxMTU = 9001
)

type setting struct {
	flag, env, def, usage string
}

var table = []setting{
	{"state-dir", "ENIWIRE_STATE_DIR", "/var/lib/eniwire", "directory of the journal and the instance-type cache"},
	{"socket", "ENIWIRE_SOCKET", "/run/eniwire/agent.sock", "unix socket of the agent API (mode 0600)"},
	{"metrics-addr", "ENIWIRE_METRICS_ADDR", ":61678", "listen address of /metrics, /healthz and /readyz"},
	{"awscni-metrics", "ENIWIRE_AWSCNI_METRICS", "false", "true: /metrics also serves the AWS VPC CNI's awscni_* metrics (computed from eniwire's own), for dashboards and alerts written for aws-node"},
	{"cluster-name", "CLUSTER_NAME", "", "cluster name, tagged on every ENI"},
	{"warm-eni-target", "WARM_ENI_TARGET", "1", "whole ENIs' worth of free IPs to keep (unused when a WARM_IP/MINIMUM_IP target is set)"},
	{"warm-ip-target", "WARM_IP_TARGET", "0", "free IPs to keep (0: unset); in prefix mode rounded up to whole prefixes, and it overrides WARM_PREFIX_TARGET"},
	{"minimum-ip-target", "MINIMUM_IP_TARGET", "0", "IPs to hold at least (0: unset)"},
	{"enable-prefix-delegation", "ENABLE_PREFIX_DELEGATION", "false", "true: new room comes as /28 prefixes, 16 pod IPs per ENI slot (Nitro types; others keep secondary IPs); a subnet with no free /28 gets single IPs until prefixes can be assigned again"},
	{"enable-ipv6", "ENABLE_IPv6", "false", "true: pods get IPv6 addresses of one /80 the node takes on its primary ENI at start (AssignIpv6Addresses), as the AWS VPC CNI's IPv6 mode: no secondary ENI, no warm target, no VPC IPv4 pod address (IPv4 egress from a node-local 169.254.172.0/22 address translated to the node's IPv4); needs ENABLE_PREFIX_DELEGATION=true, a Nitro type and a subnet with an IPv6 /64, and refuses custom networking"},
	{"enable-ipv4", "ENABLE_IPv4", "", "true: pods get VPC IPv4 addresses; with ENABLE_IPv6=true that is dual-stack mode, each pod holding an IPv4 of the warm pool (secondary IPs or /28 prefixes, as without IPv6) and an IPv6 of the primary ENI's /80, with no node-local egress address (needs a Nitro type and a subnet with an IPv6 /64, refuses custom networking); false needs ENABLE_IPv6=true (empty: false with ENABLE_IPv6=true, else true)"},
	{"enable-subnet-discovery", "ENABLE_SUBNET_DISCOVERY", "true", "true: new ENIs go to the subnet of the node's VPC and zone with the most free addresses among the node's own (unless tagged kubernetes.io/role/cni=0) and those tagged kubernetes.io/role/cni=1 (and, if tagged kubernetes.io/cluster/<name>, for this cluster); false: the node's own subnet only"},
	{"warm-prefix-target", "WARM_PREFIX_TARGET", "1", "prefix mode: /28 prefixes' worth of free IPs to keep (unused when a WARM_IP/MINIMUM_IP target is set; 0: WARM_ENI_TARGET applies)"},
	{"max-eni", "MAX_ENI", "0", "ENIs to hold at most, primary included (0: the instance limit)"},
	{"max-pods", "MAX_PODS", "0", "pods the node runs at most; the pool never holds more IPs and the per-pod traffic map no more pods (0: what eniwirectl max-pods prints for the instance: ENIs x (IPs per ENI - 1) + 2, 16 IPs a slot in prefix mode, capped at 110 up to 30 vCPUs, else 250)"},
	{"ip-cooldown-period", "IP_COOLDOWN_PERIOD", "120s", "time a released IP stays out of use (seconds or a duration)"},
	{"reconcile-interval", "ENIWIRE_RECONCILE_INTERVAL", "60s", "time between reconciles with EC2 after one that found something to set right"},
	{"max-reconcile-interval", "ENIWIRE_MAX_RECONCILE_INTERVAL", "10m", "the reconcile interval doubles up to this after each reconcile that found the books and EC2 agreeing or saw EC2 throttle this node's describes"},
	{"orphan-sweep-interval", "ENIWIRE_ORPHAN_SWEEP_INTERVAL", "5m", "mean time between this node's sweeps for the cluster's ENIs whose owner instance is gone (doubling, up to 6 times it, while its sweeps collect nothing)"},
	{"add-wait", "ENIWIRE_ADD_WAIT", "10s", "an ADD that finds the warm pool empty waits this long for the IPs the pool is bringing, first come first served (negative: answered \"no IP\" at once); when the node cannot get an IP (max pods, the ENI limit, a full subnet, EC2 refusing) it fails at once naming the cause; keep it under the plugin's timeout in the conflist"},
	{"pool-interval", "ENIWIRE_POOL_INTERVAL", "5s", "time between pool checks when nothing wakes the pool manager"},
	{"release-delay", "ENIWIRE_RELEASE_DELAY", "60s", "hysteresis: surplus must last this long before IPs or ENIs are released"},
	{"gc-grace", "ENIWIRE_GC_GRACE", "5m", "our available ENIs younger than this are not collected"},
	{"start-jitter", "ENIWIRE_START_JITTER", "10s", "the first EC2 work waits a random part of this"},
	{"journal-sync", "ENIWIRE_JOURNAL_SYNC", "batched", "when pod assignments reach the disk: always (fdatasync before the answer) or batched (written before the answer, fdatasync'd within 10 ms); ENI operations are fdatasync'd before their EC2 call either way"},
	{"region", "AWS_REGION", "", "AWS region (empty: from the SDK's sources, then IMDS)"},
	{"datapath", "ENIWIRE_DATAPATH", "bpf", "bpf (tc programs route pods by their ENI), hostroute (pod /32 routes to host veths only) or none (IPAM only: simulations)"},
	{"bpf-pin-root", "ENIWIRE_BPF_PIN_ROOT", "/sys/fs/bpf/eniwire/v1", "bpffs directory of the pinned maps and links (bpf datapath)"},
	{"sysctl-root", "ENIWIRE_SYSCTL_ROOT", "/host/proc/sys", "where the agent writes the node's sysctls (ip_forward, rp_filter of ENIs): the host's /proc/sys/net mounted under it, since a container's own /proc/sys is read-only; /proc/sys outside a container (bpf datapath)"},
	{"eni-mtu", "AWS_VPC_ENI_MTU", strconv.Itoa(api.DefaultMTU), "MTU of the pods' veths (the primary ENI's when smaller) and, with the bpf datapath, of secondary ENIs (576 to 9001)"},
	{"service-cidrs", "ENIWIRE_SERVICE_CIDRS", "", "comma-separated CIDRs handed to the host stack for kube-proxy (needed when they lie in the VPC; required with external SNAT and the bpf datapath, which refuses to start without them, and in IPv6 mode, which refuses to start without an IPv6 one)"},
	{"external-snat", "AWS_VPC_K8S_CNI_EXTERNALSNAT", "false", "true: something outside the node translates; the agent installs no masquerade rule"},
	{"exclude-snat-cidrs", "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", "", "comma-separated CIDRs, besides the VPC's, that pod traffic reaches untranslated"},
	{"randomize-snat", "AWS_VPC_K8S_CNI_RANDOMIZESNAT", "prng", "SNAT port choice: prng, hashrandom or none"},
	{"cni-bin-dir", "ENIWIRE_CNI_BIN_DIR", "/host/opt/cni/bin", "host CNI bin dir the plugin is installed into once the agent is ready (empty: no install)"},
	{"cni-conf-dir", "ENIWIRE_CNI_CONF_DIR", "/host/etc/cni/net.d", "host CNI conf dir the conflist is written into once the agent is ready"},
	{"cni-conflist", "ENIWIRE_CNI_CONFLIST", "/etc/eniwire/cni/10-eniwire.conflist", "conflist to install"},
	{"cni-plugin", "ENIWIRE_CNI_PLUGIN", "/usr/local/bin/eniwire", "plugin binary to install"},
	{"custom-network", "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "false", "true: new ENIs take the subnet and security groups of the node's ENIConfig (crd.k8s.amazonaws.com/v1alpha1), read from the Kubernetes API"},
	{"eni-config-label", "ENI_CONFIG_LABEL_DEF", eniconfig.DefaultLabel, "custom networking: the node label whose value names the node's ENIConfig (e.g. topology.kubernetes.io/zone); a node with neither it nor the annotation gets the ENIConfig named default"},
	{"eni-config-annotation", "ENI_CONFIG_ANNOTATION_DEF", eniconfig.DefaultAnnotation, "custom networking: the node annotation whose value names the node's ENIConfig; it wins over the label"},
	{"enable-pod-eni", "ENABLE_POD_ENI", "false", "true: security groups for pods: a pod that SecurityGroupPolicies (vpcresources.k8s.aws/v1beta1) select takes its IP from an ENI carrying exactly the union of their groups, created on demand and given back once its pods are gone (needs --node-name, IPv4 mode)"},
	{"pod-security-group-enforcing-mode", "POD_SECURITY_GROUP_ENFORCING_MODE", "strict", "strict: every packet of a pod with security groups, to the node's other pods too, goes through the VPC, whose groups judge it, and none is SNATed (the bpf datapath; outside the VPC it needs a NAT gateway); standard: same-node traffic and SNAT as for other pods, which the groups then do not see"},
	{"enable-network-policy", "ENABLE_NETWORK_POLICY", "true", "true: the bpf datapath enforces NetworkPolicy (networking.k8s.io/v1) on the node's pods, from the Pods, Namespaces and NetworkPolicies the agent watches (needs --node-name); false: no enforcement at all, every flow allowed (other datapaths never enforce)"},
	{"node-name", "MY_NODE_NAME", "", "this node's name in Kubernetes (the DaemonSet sets it from spec.nodeName): the agent keeps its eniwire.io/IPAMReady condition and removes its startup taint; custom networking watches it; NetworkPolicy enforcement compiles this node's pods (empty: none of these)"},
	{"kubeconfig", "KUBECONFIG", "", "kubeconfig file for the Kubernetes API (empty: the pod's in-cluster service account)"},
	{"log-level", "ENIWIRE_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"log-format", "ENIWIRE_LOG_FORMAT", "json", "json or text"},
	{"clock-factor", "ENIWIRE_CLOCK_FACTOR", "1", "virtual seconds per wall second (simulation only)"},
}

func parseSettings(args []string) (*settings, error) {
	fs := flag.NewFlagSet("eniwire-agent", flag.ContinueOnError)
	vals := map[string]*string{}
	for _, s := range table {
		def := s.def
		if v, ok := os.LookupEnv(s.env); ok {
			def = v
		}
		vals[s.flag] = fs.String(s.flag, def, s.usage)
	}
	fs.Usage = func() { printUsage(fs.Output()) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var errs []error
	str := func(n string) string { return *vals[n] }
	num := func(n string) int {
		v, err := strconv.Atoi(str(n))
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", n, err))
		}
		return v
	}
	dur := func(n string) time.Duration {
		s := str(n)
		if secs, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(secs * float64(time.Second))
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", n, err))
		}
		return v
	}
	factor, err := strconv.ParseFloat(str("clock-factor"), 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("--clock-factor: %w", err))
	}
	s := &settings{
		stateDir: str("state-dir"), socket: str("socket"), metricsAddr: str("metrics-addr"), cluster: str("cluster-name"),
		logLevel: str("log-level"), logFormat: str("log-format"), region: str("region"), datapath: str("datapath"),
		warmENI: num("warm-eni-target"), warmIP: num("warm-ip-target"), minIP: num("minimum-ip-target"),
		maxENI: num("max-eni"), maxPods: num("max-pods"), warmPrefix: num("warm-prefix-target"),
		cooldown: dur("ip-cooldown-period"), reconcile: dur("reconcile-interval"), maxReconcile: dur("max-reconcile-interval"),
		orphanSweep: dur("orphan-sweep-interval"), poolInterval: dur("pool-interval"),
		releaseDelay: dur("release-delay"), gcGrace: dur("gc-grace"), jitter: dur("start-jitter"), addWait: dur("add-wait"), clockFactor: factor,
		pinRoot: str("bpf-pin-root"), sysctlRoot: str("sysctl-root"), serviceCIDRs: str("service-cidrs"), externalSNAT: str("external-snat"),
		excludeSNAT: str("exclude-snat-cidrs"), randomizeSNAT: str("randomize-snat"), eniMTU: num("eni-mtu"),
		cniBinDir: str("cni-bin-dir"), cniConfDir: str("cni-conf-dir"), cniConflist: str("cni-conflist"),
		cniPlugin: str("cni-plugin"), nodeName: str("node-name"), eniConfigLabel: str("eni-config-label"),
		eniConfigAnnotation: str("eni-config-annotation"), kubeconfig: str("kubeconfig"),
		podSGMode: str("pod-security-group-enforcing-mode"),
	}
	if s.prefixDelegation, err = strconv.ParseBool(str("enable-prefix-delegation")); err != nil {
		errs = append(errs, fmt.Errorf("--enable-prefix-delegation: %w", err))
	}
	if s.awsCNIMetrics, err = strconv.ParseBool(str("awscni-metrics")); err != nil {
		errs = append(errs, fmt.Errorf("--awscni-metrics: %w", err))
	}
	if s.customNetwork, err = strconv.ParseBool(str("custom-network")); err != nil {
		errs = append(errs, fmt.Errorf("--custom-network: %w", err))
	}
	if s.networkPolicy, err = strconv.ParseBool(str("enable-network-policy")); err != nil {
		errs = append(errs, fmt.Errorf("--enable-network-policy: %w", err))
	}
	if s.customNetwork && s.nodeName == "" {
		errs = append(errs, errors.New("--custom-network needs --node-name (MY_NODE_NAME)"))
	}
	if s.ipv6, err = strconv.ParseBool(str("enable-ipv6")); err != nil {
		errs = append(errs, fmt.Errorf("--enable-ipv6: %w", err))
	}
	s.ipv4 = !s.ipv6
	if v := strings.TrimSpace(str("enable-ipv4")); v != "" {
		if s.ipv4, err = strconv.ParseBool(v); err != nil {
			errs = append(errs, fmt.Errorf("--enable-ipv4: %w", err))
		}
	}
	if err := s.checkIPv6Mode(); err != nil {
		errs = append(errs, err)
	}
	if s.podENI, err = strconv.ParseBool(str("enable-pod-eni")); err != nil {
		errs = append(errs, fmt.Errorf("--enable-pod-eni: %w", err))
	}
	if err := s.checkPodENI(); err != nil {
		errs = append(errs, err)
	}
	if s.subnetDiscovery, err = strconv.ParseBool(str("enable-subnet-discovery")); err != nil {
		errs = append(errs, fmt.Errorf("--enable-subnet-discovery: %w", err))
	}
	if s.eniMTU < minMTU || s.eniMTU > maxMTU {
		errs = append(errs, fmt.Errorf("--eni-mtu: %d is not in [%d, %d]", s.eniMTU, minMTU, maxMTU))
	}
	if s.journalSync, err = journal.ParseSyncPolicy(str("journal-sync")); err != nil {
		errs = append(errs, fmt.Errorf("--journal-sync: %w", err))
	}
	if err := s.checkServiceCIDRs(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.checkRanges()...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("parsing settings: %v", errs)
	}
	return s, nil
}

// printUsage lists every setting with its variable and its built-in default (not the value the environment
// gives it), in one fixed form that deploy/ reads to keep the manifests equal to what the agent reads.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: eniwire-agent [flags]\n       eniwire-agent uninstall [flags]   (detach programs, unpin maps, remove the SNAT rule, conflist and plugin)")
	for _, s := range table {
		fmt.Fprintf(w, "  -%s string\n    \t%s (env %s, default %q)\n", s.flag, s.usage, s.env, s.def)
	}
}

// checkServiceCIDRs refuses the BPF datapath with external SNAT and no Service CIDRs. There from_pod sends
// every destination outside the routes map out of the pod's ENI, ClusterIPs included, so without them every
// Service breaks while the agent reports ready. Refusing, rather than learning the range, because:
//   - the Service CIDR is fixed cluster configuration the operator has (kube-apiserver's
//     --service-cluster-ip-range; on EKS DescribeCluster's kubernetesNetworkConfig), and a refusal is loud: the
//     agent's pod restarts with this message and the node stays NotReady;
//   - the kubernetes Service's ClusterIP gives one address, not the range: a guessed prefix length breaks the
//     Services outside it silently;
//   - ServiceCIDR objects (networking.k8s.io/v1) exist from Kubernetes 1.33 only and would need API access and
//     RBAC that the agent otherwise needs only for custom networking.
//
// With SNAT on, destinations outside the VPC go to the host anyway; the hostroute datapath routes every pod
// packet through the host.
//
// In IPv6 mode the same holds for any SNAT setting: IPv6 pod packets are never translated, so from_pod sends
// every IPv6 destination outside the routes map out of the ENI, and the cluster's IPv6 Service range must be
// named.
func (s *settings) checkServiceCIDRs() error {
	if s.ipv6 && s.datapath == "bpf" {
		cidrs, _ := parsePrefixes("--service-cidrs", s.serviceCIDRs) // a bad value is refused where it is read
		if !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
			return errors.New("--service-cidrs (ENIWIRE_SERVICE_CIDRS) names no IPv6 range while ENABLE_IPv6 is true: " +
				"pods' packets to Service IPs would leave by the ENI instead of reaching kube-proxy; set it to the cluster's " +
				"IPv6 Service CIDR (kube-apiserver --service-cluster-ip-range)")
		}
	}
	external, _ := strconv.ParseBool(strings.TrimSpace(s.externalSNAT)) // a bad value is refused by snat.FromEnv
	if !external || s.datapath != "bpf" || strings.TrimSpace(s.serviceCIDRs) != "" {
		return nil
	}
	return errors.New("--service-cidrs (ENIWIRE_SERVICE_CIDRS) is empty while AWS_VPC_K8S_CNI_EXTERNALSNAT is true: " +
		"pods' packets to Service IPs would leave by their ENI instead of reaching kube-proxy; set it to the cluster's " +
		"Service CIDR (kube-apiserver --service-cluster-ip-range)")
}

// checkIPv6Mode refuses ENABLE_IPv6 with the settings the AWS VPC CNI refuses it with: prefix delegation off
// (its IPv6 mode is prefix delegation of one /80, and it requires ENABLE_PREFIX_DELEGATION=true) and custom
// networking (pods of IPv6 mode live on the primary ENI, which custom networking keeps free of pods). Dual-stack
// mode (ENABLE_IPv4 too) refuses custom networking for the same reason, and takes IPv4 addresses with or
// without prefixes. Neither family is refused.
func (s *settings) checkIPv6Mode() error {
	switch {
	case !s.ipv4 && !s.ipv6:
		return errors.New("--enable-ipv4 (ENABLE_IPv4) and --enable-ipv6 (ENABLE_IPv6) are both false: pods would get no address")
	case !s.ipv6:
		return nil
	case s.customNetwork && s.ipv4:
		return errors.New("dual-stack mode (ENABLE_IPv4 and ENABLE_IPv6) cannot be used with --custom-network (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): " +
			"the pods' IPv6 addresses come of the primary ENI's /80, and custom networking keeps pods off the primary ENI")
	case s.ipv4:
		return nil // dual-stack: IPv4 as without IPv6, with or without prefixes
	case !s.prefixDelegation:
		return errors.New("--enable-ipv6 (ENABLE_IPv6) needs --enable-prefix-delegation=true (ENABLE_PREFIX_DELEGATION): " +
			"IPv6 pods take addresses of a /80 prefix on the primary ENI, as with the AWS VPC CNI, which requires both")
	case s.customNetwork:
		return errors.New("--enable-ipv6 (ENABLE_IPv6) cannot be used with --custom-network (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): " +
			"IPv6 pods take addresses of the primary ENI's /80, and custom networking keeps pods off the primary ENI")
	}
	return nil
}

// parsePrefixes reads a comma-separated CIDR list; empty items are skipped.
func parsePrefixes(name, list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// snatEnv answers snat.FromEnv with the settings' values, so that a flag given on the command line wins
// over the variable, as for every other setting.
func (s *settings) snatEnv(name string) string {
	switch name {
	case snat.EnvExternalSNAT:
		return s.externalSNAT
	case snat.EnvExcludeSNATCIDRs:
		return s.excludeSNAT
	case snat.EnvRandomizeSNAT:
		return s.randomizeSNAT
	}
	return os.Getenv(name)
}
