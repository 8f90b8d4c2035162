package deploy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eniwire/eniwire/cni"
	"github.com/eniwire/eniwire/controller"
)

// addSetUpMargin is what an ADD needs beyond its wait for an IP: the journal, the veth and the datapath.
const addSetUpMargin = 10 * time.Second

// TestThePluginOutwaitsTheAgentsADD: an ADD may wait ENIWIRE_ADD_WAIT for an IP at the agent; the plugin's
// own timeout (its default and the shipped conflist's) must outlast it with room to set the pod up, or the
// plugin gives up on an ADD about to succeed and kubelet counts a FailedCreatePodSandBox.
func TestThePluginOutwaitsTheAgentsADD(t *testing.T) {
	b, _ := readConflist(t)
	var conf struct {
		Plugins []struct {
			Type    string `json:"type"`
			Timeout string `json:"timeout"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	need := controller.DefaultAddWait + addSetUpMargin
	if cni.DefaultTimeout < need {
		t.Errorf("the plugin's default timeout %s is under the ADD's wait %s plus %s", cni.DefaultTimeout, controller.DefaultAddWait, addSetUpMargin)
	}
	for _, p := range conf.Plugins {
		if p.Type != "eniwire" || p.Timeout == "" {
			continue
		}
		d, err := time.ParseDuration(p.Timeout)
		if err != nil {
			t.Fatal(err)
		}
		if d < need {
			t.Errorf("the conflist's timeout %s is under the ADD's wait %s plus %s", d, controller.DefaultAddWait, addSetUpMargin)
		}
	}
}
