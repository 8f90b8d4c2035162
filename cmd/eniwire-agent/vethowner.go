package main

import (
	"context"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
)

// vethOwner is the node as the API serves it when the datapath removes the pods' host veths: a Release that
// found the assignment says so, and the plugin's DEL skips its own (slow) deletion of the veth. A Release that
// found no record leaves the answer as it is, so the plugin deletes what its prevResult names.
type vethOwner struct {
	*controller.Node
}

func (o vethOwner) Release(ctx context.Context, req api.ReleaseRequest) (*api.ReleaseResponse, error) {
	r, err := o.Node.Release(ctx, req)
	if err == nil && r != nil && r.Released {
		r.HostVethRemoval = api.HostVethRemovalAgent
	}
	return r, err
}
