// Command kube is the Kubernetes control plane and node of the test cluster in one binary, built from the
// k8s.io/kubernetes module this module pins: `kube apiserver|controller-manager|scheduler|kubelet|proxy|
// kubectl|etcd [flags]`. One binary links once (the six commands share most of their packages), which keeps
// the first build on a fresh 2-core machine to minutes.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"apiserver":          func() *cobra.Command { return apiserver.NewAPIServerCommand() },
	"controller-manager": func() *cobra.Command { return controllermanager.NewControllerManagerCommand() },
	"scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":            func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"proxy":              func() *cobra.Command { return proxy.NewProxyCommand() },
	"kubectl":            func() *cobra.Command { return kubectl.NewDefaultKubectlCommand() },
	"etcd":               newEtcdCommand,
}

func main() {
	name, args := strings.TrimPrefix(filepath.Base(os.Args[0]), "kube-"), os.Args[1:]
	if _, ok := commands[name]; !ok && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	newCommand, ok := commands[name]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube %s [flags]\n", strings.Join(names, "|"))
		os.Exit(2)
	}
	cmd := newCommand()
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
