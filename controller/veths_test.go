package controller_test

import (
	"context"
	"testing"

	"github.com/eniwire/eniwire/controller"
	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// vethRemover is a datapath that says whether it removes the pods' host veths.
type vethRemover struct {
	dptypes.NoDriver
	removes bool
}

func (v vethRemover) RemovesHostVeth() bool { return v.removes }

func TestReleaseSaysWhoRemovesTheHostVeth(t *testing.T) {
	for _, tc := range []struct {
		name string
		dp   dptypes.Driver
		want string
	}{
		{"the agent, when its datapath removes host veths", vethRemover{removes: true}, api.HostVethRemovalAgent},
		{"the plugin, when the datapath says it does not", vethRemover{removes: false}, ""},
		{"the plugin, when the datapath does not say", dptypes.NoDriver{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "m5.large", 500)
			node := w.startWith(fastConfig(w.dir), controller.Deps{Datapath: tc.dp}).node
			waitReady(t, node)
			assignRetrying(t, node, "pod-0")
			att := api.Attachment{ContainerID: "pod-0", IfName: "eth0"}
			r, err := node.Release(context.Background(), api.ReleaseRequest{Attachment: att})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Released || r.HostVethRemoval != tc.want {
				t.Fatalf("Release = released %v, host veth removal %q; want released, %q", r.Released, r.HostVethRemoval, tc.want)
			}
			// A release that finds no record leaves the veth to the plugin, which deletes what its prevResult names.
			r, err = node.Release(context.Background(), api.ReleaseRequest{Attachment: att})
			if err != nil {
				t.Fatal(err)
			}
			if r.Released || r.HostVethRemoval != "" {
				t.Fatalf("second Release = released %v, host veth removal %q; want neither", r.Released, r.HostVethRemoval)
			}
		})
	}
}
