package controller

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/eniwire/eniwire/controller/api"
	"github.com/eniwire/eniwire/internal/clock"
)

// vanishedPods releases the assignments of pods that went without a DEL (a node reboot, a container runtime
// that lost its state): an assignment whose network namespace is gone for longer than grace is released, and
// the release is logged and counted. Who may touch it: only the Run loop.
type vanishedPods struct {
	ipam  *ipam
	gone  func(netns string) bool
	grace time.Duration
	every time.Duration
	clock clock.Clock
	log   *slog.Logger
	// released counts the assignments released this way (eniwire_vanished_pods_released_total).
	released interface{ Inc() }

	next  time.Time
	since map[api.Attachment]time.Time
}

// netnsGone reports whether the network namespace at path is gone: the path does not exist although its
// directory does. When the directory itself is not visible (the agent's mounts do not show it) it cannot
// tell, and says not gone; nor when the path is relative: CNI_NETNS is then relative to the working
// directory of the runtime that ran the plugin, which the agent does not know (the plugin sends it absolute).
func netnsGone(path string) bool {
	if path == "" || !filepath.IsAbs(path) {
		return false
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, err := os.Stat(filepath.Dir(path))
	return err == nil
}

// check looks at every assignment's namespace when due, and releases those gone for longer than the grace.
func (v *vanishedPods) check(ctx context.Context, now time.Time) {
	if v.grace < 0 || now.Before(v.next) {
		return
	}
	v.next = now.Add(v.every)
	seen := map[api.Attachment]bool{}
	for _, a := range v.ipam.Assignments() {
		if !v.gone(a.Netns) {
			continue
		}
		seen[a.Attachment] = true
		first, ok := v.since[a.Attachment]
		if !ok {
			v.since[a.Attachment] = now
			continue
		}
		if now.Sub(first) < v.grace {
			continue
		}
		r, err := v.ipam.Release(ctx, api.ReleaseRequest{Attachment: a.Attachment})
		if err != nil {
			v.log.Warn("releasing the assignment of a vanished pod", "container", a.ContainerID, "ip", a.IP, "error", err)
			continue
		}
		delete(v.since, a.Attachment)
		if r.Released {
			v.released.Inc()
			v.log.Info("released the assignment of a pod whose network namespace is gone", "container", a.ContainerID,
				"ifname", a.IfName, "pod", a.Pod.Namespace+"/"+a.Pod.Name, "ip", a.IP, "netns", a.Netns,
				"goneFor", now.Sub(first))
		}
	}
	for att := range v.since {
		if !seen[att] {
			delete(v.since, att)
		}
	}
}
