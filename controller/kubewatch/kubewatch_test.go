package kubewatch

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestKeyReadsADeletedObjectsTombstone(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	for _, obj := range []any{p, cache.DeletedFinalStateUnknown{Key: "shop/web", Obj: p}} {
		if ns, name, ok := Key(obj); !ok || ns != "shop" || name != "web" {
			t.Errorf("Key(%T) = %q %q %v, want shop web true", obj, ns, name, ok)
		}
	}
	if _, _, ok := Key(42); ok {
		t.Error("Key(42) is ok")
	}
}

func TestSameUIDTakesAStaticPodsMirrorWhateverItsUID(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "api-uid"}}
	if !SameUID(p, "") || !SameUID(p, "api-uid") || SameUID(p, "runtime-uid") {
		t.Error("a pod matches the ADD's UID, or any when it names none, and no other")
	}
	p.Annotations = map[string]string{MirrorAnnotation: "hash"}
	if !SameUID(p, "runtime-uid") {
		t.Error("a static pod's mirror does not match the runtime's UID")
	}
}
