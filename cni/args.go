package cni

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// podArgs are the CNI_ARGS keys kubelet's runtimes pass; other keys are ignored.
type podArgs struct {
	api.PodIdentity
}

// parseArgs reads CNI_ARGS ("K=V;K=V"). Unknown keys are ignored, as runtimes add their own; a pair without
// "=" or an empty key is garbage and is refused with ErrInvalidEnvironmentVariables.
func parseArgs(raw string) (podArgs, error) {
	var out podArgs
	if strings.TrimSpace(raw) == "" {
		return out, nil
	}
	for _, pair := range strings.Split(raw, ";") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return out, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("eniwire: CNI_ARGS is malformed: %q is not a KEY=VALUE pair", pair), "CNI_ARGS="+raw)
		}
		switch k {
		case "K8S_POD_NAMESPACE":
			out.Namespace = v
		case "K8S_POD_NAME":
			out.Name = v
		case "K8S_POD_UID":
			out.UID = v
		}
	}
	return out, nil
}

// validateCmd checks what skel checks for a binary, so in-process callers get the same answers.
func validateCmd(args *skel.CmdArgs, needNetns bool) error {
	if args.ContainerID == "" {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "eniwire: CNI_CONTAINERID is missing", "")
	}
	if err := utils.ValidateContainerID(args.ContainerID); err != nil {
		return err
	}
	if err := utils.ValidateInterfaceName(args.IfName); err != nil {
		err.Msg = fmt.Sprintf("eniwire: CNI_IFNAME %q is not a valid interface name: %s", args.IfName, err.Msg)
		return err
	}
	if needNetns && args.Netns == "" {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "eniwire: CNI_NETNS is missing", "")
	}
	return nil
}

// absolute resolves a CNI_NETNS relative to the plugin's working directory (the runtime's), which only the
// plugin knows: the agent judges from the path whether the pod's namespace is gone. A path that cannot be
// resolved is sent as it came (the agent cannot judge a relative one, and keeps its pod).
func absolute(netns string) string {
	if abs, err := filepath.Abs(netns); err == nil {
		return abs
	}
	return netns
}

// hostVethName names the host side after the pod, so it reads the same across restarts of the plugin; without
// Kubernetes args (cnitool, tests) the container id stands in for the pod.
func hostVethName(pod api.PodIdentity, containerID, ifName string) string {
	key := containerID
	if pod.Namespace != "" && pod.Name != "" {
		key = pod.Namespace + "/" + pod.Name
	}
	if ifName != "eth0" {
		key += "/" + ifName
	}
	return plumbing.HostVethName(key)
}
