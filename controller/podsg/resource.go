package podsg

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// securityGroupPolicies is the resource of the AWS VPC resource controller's CRD, which EKS installs and
// deploy/ carries a copy of: the same group, version and schema, so one CRD serves both.
var securityGroupPolicies = schema.GroupVersionResource{Group: "vpcresources.k8s.aws", Version: "v1beta1", Resource: "securitygrouppolicies"}

// crdName names the CRD in messages, as `kubectl get crd` shows it.
var crdName = securityGroupPolicies.GroupResource().String()

// policyInformer watches every SecurityGroupPolicy of the cluster through the dynamic client, telling
// listed each outcome of a list or watch call: the API server answers NotFound when the CRD is not
// installed, and the watcher must tell that apart from an API server it cannot reach.
func policyInformer(client dynamic.Interface, listed func(error)) cache.SharedIndexInformer {
	r := client.Resource(securityGroupPolicies)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := r.List(ctx, o)
			listed(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := r.Watch(ctx, o)
			listed(err)
			return w, err
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	_ = inf.SetTransform(slim)
	return inf
}

// onPolicyListed records a list or watch outcome of the SecurityGroupPolicies: the CRD's presence, and the
// connection's error.
func (w *Watcher) onPolicyListed(err error) {
	absent := apierrors.IsNotFound(err)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil || absent:
		w.watchErr = nil
	default:
		w.watchErr = err
	}
	if absent == w.crdAbsent {
		w.notify()
		return
	}
	w.crdAbsent = absent
	if absent {
		w.log.Warn("the SecurityGroupPolicy CRD is not installed: no pod gets security groups of its own until it is", "crd", crdName)
	} else {
		w.log.Info("the SecurityGroupPolicy CRD is installed", "crd", crdName)
	}
	w.recheck(func(podKey, *startedPod) bool { return true })
	w.notify()
}

// crdAbsentNow reports whether the last list said the CRD is not installed.
func (w *Watcher) crdAbsentNow() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.crdAbsent
}
