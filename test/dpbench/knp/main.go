// Command knp runs the enforcement of SIG Network's reference NetworkPolicy implementation,
// sigs.k8s.io/kube-network-policies (its networkpolicy controller: nftables rules that send each new flow
// of a selected pod to an nfqueue, and a userspace verdict on it), in the network namespace it is started
// in, for dpbench's comparison rows. The Pods, Namespaces and NetworkPolicies it enforces come from a JSON
// file (a v1 List) through a client-go fake clientset, read by the controller's own informers: the
// controller runs unchanged, only its API server is in memory.
//
// It is its own Go module so that kube-network-policies' dependencies (NRI, nfqueue, network-policy-api)
// stay out of eniwire's. Start it with `ip netns exec NS knp -objects FILE -node NAME`; SIGTERM or SIGINT
// stops it, and the controller deletes its nftables table on the way out.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	objects := flag.String("objects", "", "JSON file holding a v1 List of the Namespaces, Pods and NetworkPolicies to enforce")
	node := flag.String("node", "", "the node whose pods are enforced (their spec.nodeName)")
	queue := flag.Int("nfqueue-id", 100, "the nfqueue the controller reads new flows from")
	flag.Parse()
	if err := run(*objects, *node, *queue); err != nil {
		fmt.Fprintf(os.Stderr, "knp: %v\n", err)
		os.Exit(1)
	}
}

func run(objectsPath, node string, queue int) error {
	if objectsPath == "" || node == "" {
		return fmt.Errorf("-objects and -node are required")
	}
	objs, err := readObjects(objectsPath)
	if err != nil {
		return err
	}
	// The controller's NRI plugin (on by default, as in the project's own binary) would register with a
	// container runtime on this machine, if one listens; a socket that does not parse makes it give up at
	// once and the controller use the API's pod addresses alone, which are all it needs here.
	if err := os.Setenv("NRI_PLUGIN_SOCKET", "none"); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{NodeName: node, QueueID: queue, NetfilterBug1766Fix: true},
	)
	if err != nil {
		return fmt.Errorf("building the kube-network-policies controller: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	select {
	case err := <-done:
		if ctx.Err() == nil {
			return fmt.Errorf("the kube-network-policies controller stopped: %v", err)
		}
	case <-ctx.Done():
		<-done // Run deletes its nftables table before it returns
	}
	return nil
}

// readObjects decodes a v1 List of Namespaces, Pods and NetworkPolicies.
func readObjects(path string) ([]runtime.Object, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	var objs []runtime.Object
	for i, raw := range list.Items {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("decoding item %d of %s: %w", i, path, err)
		}
		var obj runtime.Object
		switch meta.Kind {
		case "Namespace":
			obj = &corev1.Namespace{}
		case "Pod":
			obj = &corev1.Pod{}
		case "NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		default:
			return nil, fmt.Errorf("item %d of %s: kind %q is none of Namespace, Pod, NetworkPolicy", i, path, meta.Kind)
		}
		if err := json.Unmarshal(raw, obj); err != nil {
			return nil, fmt.Errorf("decoding item %d (%s) of %s: %w", i, meta.Kind, path, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}
