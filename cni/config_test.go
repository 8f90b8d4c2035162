package cni_test

import (
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni"
)

func TestParseConfAppliesDefaultsAndExplainsBadValues(t *testing.T) {
	tests := []struct {
		name     string
		conf     string
		wantCode uint
		wantMsg  string
	}{
		{"a minimal config gets the defaults", `{"cniVersion":"1.1.0","name":"n"}`, 0, ""},
		{"malformed JSON is a decoding failure", `{"cniVersion":`, types.ErrDecodingFailure, "not valid JSON"},
		{"a missing cniVersion is refused", `{"name":"n"}`, types.ErrInvalidNetworkConfig, "cniVersion is missing"},
		{"an unknown cniVersion is incompatible", `{"cniVersion":"2.0.0","name":"n"}`, types.ErrIncompatibleCNIVersion, `"2.0.0" is not supported`},
		{"a missing name is refused", `{"cniVersion":"1.1.0"}`, types.ErrInvalidNetworkConfig, "name is missing"},
		{"an earlier version's mtu is ignored: the agent says the MTU", `{"cniVersion":"1.1.0","name":"n","mtu":100}`, 0, ""},
		{"a relative log file is refused", `{"cniVersion":"1.1.0","name":"n","logFile":"x.log"}`, types.ErrInvalidNetworkConfig, "logFile"},
		{"an unknown log level is refused", `{"cniVersion":"1.1.0","name":"n","logLevel":"loud"}`, types.ErrInvalidNetworkConfig, "logLevel"},
		{"a timeout that is no duration is refused", `{"cniVersion":"1.1.0","name":"n","timeout":"soon"}`, types.ErrInvalidNetworkConfig, "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := cni.ParseConf([]byte(tc.conf))
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("ParseConf: %v", err)
				}
				if conf.AgentSocket != "/run/eniwire/agent.sock" || conf.LogLevel != "info" {
					t.Fatalf("defaults = socket %q level %q", conf.AgentSocket, conf.LogLevel)
				}
				return
			}
			e, ok := err.(*types.Error)
			if !ok || e.Code != tc.wantCode || !strings.Contains(e.Msg+e.Details, tc.wantMsg) {
				t.Fatalf("ParseConf error = %#v, want code %d mentioning %q", err, tc.wantCode, tc.wantMsg)
			}
		})
	}
}
