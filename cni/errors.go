package cni

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/eniwire/eniwire/cni/plumbing"
	"github.com/eniwire/eniwire/controller/api"
)

// agentError turns an agent API failure into the CNI error a runtime acts on: retryable conditions get
// ErrTryAgainLater so kubelet retries instead of giving up on the pod. The agent's message, in the details,
// names the cause (for no free IP: the pool refilling, the node at its max pods or its ENI limit).
func agentError(op, socket string, err error) *types.Error {
	if errors.Is(err, api.ErrUnreachable) {
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("eniwire: %s: the eniwire agent is not reachable at %s (is eniwire-agent running?)", op, socket),
			err.Error())
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		return types.NewError(types.ErrInternal, fmt.Sprintf("eniwire: %s: %v", op, err), "")
	}
	switch ae.Code {
	case api.CodeNoIPAvailable:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("eniwire: %s: no IP address is free on this node", op),
			ae.Message)
	case api.CodeNotReady:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("eniwire: %s: the eniwire agent is still starting", op), ae.Message)
	case api.CodeNotFound:
		return types.NewError(types.ErrUnknownContainer,
			fmt.Sprintf("eniwire: %s: the agent holds no assignment for this container", op), ae.Message)
	case api.CodeBadRequest:
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("eniwire: %s: the agent refused the request: %s", op, ae.Message), "")
	default:
		if ae.Retryable {
			return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("eniwire: %s: %s", op, ae.Message), ae.Code)
		}
		return types.NewError(types.ErrInternal, fmt.Sprintf("eniwire: %s: the agent failed: %s", op, ae.Message), ae.Code)
	}
}

// plumbingError maps kernel-side failures; a missing namespace is the runtime's mistake, not ours.
func plumbingError(op string, err error) *types.Error {
	switch {
	case errors.Is(err, plumbing.ErrNetnsMissing):
		return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("eniwire: %s: %v", op, err), "")
	case errors.Is(err, plumbing.ErrIfaceTaken):
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("eniwire: %s: %v", op, err), "")
	default:
		return types.NewError(types.ErrInternal, fmt.Sprintf("eniwire: %s: %v", op, err), "")
	}
}

// vethGoneRefusal reports whether the agent refused an Assign because the host veth it names is gone or
// being removed: the pair the ADD found was a released sandbox's.
func vethGoneRefusal(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == api.CodeHostVethGone
}
