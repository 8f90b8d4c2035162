package podsg

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eniwire/eniwire/controller/kubewatch"
)

// ReasonNoAddress is the reason of the Warning Event on a pod whose set the node cannot give an address:
// no ENI slot for it, or EC2 refusing an ENI with its groups.
const ReasonNoAddress = "SecurityGroupSetUnavailable"

// Refused reports, as a Warning Event on the pod, why its ADD found no address of its security-group set;
// once per distinct reason (kubelet retries the ADD every few seconds), until the pod starts or goes.
func (w *Watcher) Refused(namespace, name, uid, why string) {
	k := podKey{namespace, name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unavailable[k] == why {
		return
	}
	w.unavailable[k] = why
	p, err := w.pods.Pods(namespace).Get(name)
	if err != nil || !kubewatch.SameUID(p, types.UID(uid)) {
		return
	}
	w.log.Warn("pod's security-group set has no address on the node", "pod", k, "why", why)
	w.recorder.Event(p, corev1.EventTypeWarning, ReasonNoAddress, why)
}
