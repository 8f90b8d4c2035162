package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/eniwire/eniwire/test/vpcfabric"
)

// The fixed addresses of an IPv4 cluster: Services come from ServiceCIDR (outside the simulated VPC's
// 10.0.0.0/16), the API server's Service is its first address and cluster DNS the tenth, as kubeadm lays
// them out. An IPv6 cluster's are in Family.
const (
	ServiceCIDR   = "10.96.0.0/16"
	APIServiceIP  = "10.96.0.1"
	DNSServiceIP  = "10.96.0.10"
	ClusterDomain = "cluster.local"
	apiPort       = 6443
)

// ControlPlane is etcd, kube-apiserver, kube-controller-manager and kube-scheduler, all in the first node's
// network namespace (a control-plane node, as kubeadm makes one): the API server advertises that node's VPC
// address, which the `kubernetes` Service's endpoint needs to be (a loopback address is refused).
type ControlPlane struct {
	// Server is the API server's URL inside the VPC (kubelets, kube-proxy, pods through the Service).
	Server string
	procs  []*Process
}

// StartControlPlane issues the certificates and starts the four programs, returning once the API server's
// /readyz answers. Services take addresses of family's range.
func StartControlPlane(ctx context.Context, dir, kube string, pki *PKI, ns Namespaces, nodeIP net.IP, family Family) (*ControlPlane, error) {
	cp := &ControlPlane{Server: "https://" + net.JoinHostPort(nodeIP.String(), fmt.Sprint(apiPort))}
	ok := false
	defer func() {
		if !ok {
			cp.Stop()
		}
	}()
	if err := pki.Cert("apiserver", "kube-apiserver", nil,
		[]net.IP{nodeIP, net.ParseIP(family.APIServiceIP), net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain, "localhost"}); err != nil {
		return nil, err
	}
	// The API server's client certificate towards kubelets (exec, logs, port-forward).
	if err := pki.Cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil); err != nil {
		return nil, err
	}
	cmKubeconfig, err := pki.Kubeconfig("controller-manager", "system:kube-controller-manager", nil, cp.Server)
	if err != nil {
		return nil, err
	}
	schedKubeconfig, err := pki.Kubeconfig("scheduler", "system:kube-scheduler", nil, cp.Server)
	if err != nil {
		return nil, err
	}

	etcdDir := filepath.Join(dir, "etcd")
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		return nil, err
	}
	etcd, err := Start(dir, "etcd", ns, nil, kube, "etcd", "--data-dir", etcdDir, "--listen-client-url", "http://127.0.0.1:2379")
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, etcd)
	inNode := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: vpcfabric.DialContext(ns.NetnsPath)}}
	ectx, ecancel := context.WithTimeout(ctx, time.Minute)
	defer ecancel()
	if err := waitFor(ectx, "etcd /health", etcd, func() error {
		resp, err := inNode.Get("http://127.0.0.1:2379/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}); err != nil {
		return nil, err
	}
	apiserverFlags := []string{"--etcd-servers=http://127.0.0.1:2379",
		"--advertise-address=" + nodeIP.String(),
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + pki.Path("apiserver.crt"), "--tls-private-key-file=" + pki.Path("apiserver.key"),
		"--client-ca-file=" + pki.Path("ca.crt"),
		"--kubelet-client-certificate=" + pki.Path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pki.Path("apiserver-kubelet-client.key"),
		"--service-account-key-file=" + pki.Path("sa.key"),
		"--service-account-signing-key-file=" + pki.Path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc." + ClusterDomain,
		"--service-cluster-ip-range=" + family.ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		// Node names are EC2's private DNS names, which no resolver of the simulated VPC answers.
		"--kubelet-preferred-address-types=InternalIP",
	}
	if family.IsIPv6() {
		apiserverFlags = append(apiserverFlags, "--bind-address=::")
	}
	apiserver, err := Start(dir, "kube-apiserver", ns, nil, append([]string{kube, "apiserver"}, apiserverFlags...)...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, apiserver)
	if err := pki.Cert("admin", "eniwire-test-admin", []string{"system:masters"}, nil, nil); err != nil {
		return nil, err
	}
	admin := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     vpcfabric.DialContext(ns.NetnsPath),
		TLSClientConfig: pki.clientTLS("admin"),
	}}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := waitFor(wctx, "kube-apiserver /readyz", apiserver, func() error {
		resp, err := admin.Get(cp.Server + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	cm, err := Start(dir, "kube-controller-manager", ns, nil, kube, "controller-manager",
		"--kubeconfig="+cmKubeconfig, "--authentication-kubeconfig="+cmKubeconfig, "--authorization-kubeconfig="+cmKubeconfig,
		"--bind-address=127.0.0.1",
		"--service-account-private-key-file="+pki.Path("sa.key"),
		"--root-ca-file="+pki.Path("ca.crt"),
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range="+family.ServiceCIDR,
		"--leader-elect=false",
		// eniwire assigns pod addresses from the VPC: no node CIDRs.
		"--allocate-node-cidrs=false",
		"--profiling=false",
	)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, cm)
	sched, err := Start(dir, "kube-scheduler", ns, nil, kube, "scheduler",
		"--kubeconfig="+schedKubeconfig, "--authentication-kubeconfig="+schedKubeconfig, "--authorization-kubeconfig="+schedKubeconfig,
		"--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false",
	)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, sched)
	ok = true
	return cp, nil
}

// Stop stops the programs, the last started first.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		_ = cp.procs[i].Stop(10 * time.Second)
	}
}

// Processes are the control plane's programs, for logs.
func (cp *ControlPlane) Processes() []*Process { return cp.procs }

// clientTLS is a TLS client configuration with name's certificate, trusting the cluster CA.
func (p *PKI) clientTLS(name string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	cfg := &tls.Config{RootCAs: pool}
	if cert, err := tls.LoadX509KeyPair(p.Path(name+".crt"), p.Path(name+".key")); err == nil {
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}
