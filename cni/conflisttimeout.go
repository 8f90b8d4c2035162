package cni

import (
	"encoding/json"
	"fmt"
	"time"
)

// SetUpMargin is what an ADD needs at the agent and in the plugin beyond its wait for an IP (the journal, the
// veth, the datapath, the answer): the plugin's timeout must exceed the agent's ADD wait by at least this, or
// the plugin gives up on an ADD about to succeed and kubelet counts a FailedCreatePodSandBox.
const SetUpMargin = 10 * time.Second

// ConflistTimeout is the timeout of the eniwire plugin in a conflist: its "timeout", or DefaultTimeout when it
// has none. A conflist without an eniwire plugin, or whose eniwire timeout does not parse, is an error.
func ConflistTimeout(conflist []byte) (time.Duration, error) {
	var list struct {
		Plugins []struct {
			Type    string `json:"type"`
			Timeout string `json:"timeout"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(conflist, &list); err != nil {
		return 0, fmt.Errorf("the conflist is not valid JSON: %w", err)
	}
	for _, p := range list.Plugins {
		if p.Type != "eniwire" {
			continue
		}
		if p.Timeout == "" {
			return DefaultTimeout, nil
		}
		d, err := time.ParseDuration(p.Timeout)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("the eniwire plugin's timeout %q is not a positive duration such as \"30s\"", p.Timeout)
		}
		return d, nil
	}
	return 0, fmt.Errorf("the conflist has no plugin of type eniwire")
}
