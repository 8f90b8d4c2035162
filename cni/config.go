// Package cni is the eniwire CNI plugin: ADD, DEL, CHECK, STATUS and GC over the agent API, with the kernel
// work in cni/plumbing. cmd/eniwire wires it to skel; tests call the same methods in-process.
package cni

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/eniwire/eniwire/controller/api"
)

// Defaults of the plugin's configuration.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultLogLevel = "info"
)

// Versions are the CNI spec versions the plugin speaks. 0.3.0 and later carry interfaces in results; CHECK
// exists from 0.4.0, STATUS and GC from 1.1.0.
var Versions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// Conf is the plugin's entry in a conflist.
type Conf struct {
	types.NetConf
	// AgentSocket is the agent's unix socket (default api.DefaultSocket).
	AgentSocket string `json:"agentSocket,omitempty"`
	// There is no "mtu": the agent's answer says what both veth ends carry (api.Assignment.MTU, from
	// AWS_VPC_ENI_MTU and the primary ENI). An "mtu" left in an earlier version's conflist is ignored.
	// LogFile receives the plugin's JSON log lines (appended); empty means stderr. Never stdout.
	LogFile string `json:"logFile,omitempty"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `json:"logLevel,omitempty"`
	// Timeout bounds each call to the agent, as a Go duration ("10s").
	Timeout string `json:"timeout,omitempty"`

	timeout time.Duration
}

// ParseConf decodes and validates stdin, applying defaults. Errors are *types.Error with the CNI code a runtime
// shows: ErrDecodingFailure for bad JSON, ErrInvalidNetworkConfig for a bad value, ErrIncompatibleCNIVersion.
func ParseConf(stdin []byte) (*Conf, error) {
	conf := &Conf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "eniwire: the network configuration is not valid JSON", err.Error())
	}
	if conf.CNIVersion == "" {
		return nil, invalidConf("cniVersion is missing")
	}
	if !supported(conf.CNIVersion) {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("eniwire: cniVersion %q is not supported", conf.CNIVersion),
			fmt.Sprintf("supported versions: %v", Versions.SupportedVersions()))
	}
	if conf.Name == "" {
		return nil, invalidConf("name is missing")
	}
	if conf.AgentSocket == "" {
		conf.AgentSocket = api.DefaultSocket
	}
	if !filepath.IsAbs(conf.AgentSocket) {
		return nil, invalidConf(fmt.Sprintf("agentSocket %q must be an absolute path", conf.AgentSocket))
	}
	if conf.LogFile != "" && !filepath.IsAbs(conf.LogFile) {
		return nil, invalidConf(fmt.Sprintf("logFile %q must be an absolute path", conf.LogFile))
	}
	if conf.LogLevel == "" {
		conf.LogLevel = DefaultLogLevel
	}
	if _, err := parseLevel(conf.LogLevel); err != nil {
		return nil, invalidConf(err.Error())
	}
	conf.timeout = DefaultTimeout
	if conf.Timeout != "" {
		d, err := time.ParseDuration(conf.Timeout)
		if err != nil || d <= 0 {
			return nil, invalidConf(fmt.Sprintf("timeout %q is not a positive duration such as \"10s\"", conf.Timeout))
		}
		conf.timeout = d
	}
	if conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&conf.NetConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "eniwire: prevResult cannot be parsed", err.Error())
		}
	}
	return conf, nil
}

func supported(v string) bool {
	for _, s := range Versions.SupportedVersions() {
		if s == v {
			return true
		}
	}
	return false
}

func invalidConf(msg string) *types.Error {
	return types.NewError(types.ErrInvalidNetworkConfig, "eniwire: invalid network configuration: "+msg, "")
}
