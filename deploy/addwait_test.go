package deploy

import (
	"testing"

	"github.com/eniwire/eniwire/cni"
	"github.com/eniwire/eniwire/controller"
)

// TestThePluginOutwaitsTheAgentsADD: an ADD may wait ENIWIRE_ADD_WAIT for an IP at the agent; the plugin's
// own timeout (its default and the shipped conflist's) must outlast it with room to set the pod up, or the
// plugin gives up on an ADD about to succeed and kubelet counts a FailedCreatePodSandBox.
func TestThePluginOutwaitsTheAgentsADD(t *testing.T) {
	b, _ := readConflist(t)
	need := controller.DefaultAddWait + cni.SetUpMargin
	if cni.DefaultTimeout < need {
		t.Errorf("the plugin's default timeout %s is under the ADD's wait %s plus %s", cni.DefaultTimeout, controller.DefaultAddWait, cni.SetUpMargin)
	}
	d, err := cni.ConflistTimeout(b)
	if err != nil {
		t.Fatal(err)
	}
	if d < need {
		t.Errorf("the conflist's timeout %s is under the ADD's wait %s plus %s", d, controller.DefaultAddWait, cni.SetUpMargin)
	}
}
