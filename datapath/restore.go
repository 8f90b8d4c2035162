package datapath

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// Upgrades. A new agent's programs take over an earlier agent's in two steps, so that no packet meets an
// empty map: Load loads the programs and their maps while every link still runs the earlier programs (on
// their own maps, alive though unpinned when replaced), Restore writes the pods and ENIs the caller keeps
// (the agent's journal) into the new maps, and Attach moves the links. Between Load and Attach the node's
// packets are handled exactly as before the upgrade. A map whose layout changed with the upgrade (judged by
// BTF, layout.go) starts empty; without Restore before Attach, every pod's packets would be dropped as
// spoofed until the caller wrote them again. The pods' policy flags, which the caller does not keep, are
// carried from a replaced pods map by its own layout (carryflags.go), so Restore writes each pod isolated
// as it was.

// Load loads the programs, reusing the maps pinned under cfg.PinRoot by an earlier agent (replacing, with
// cfg.MigrateMaps, those whose layout changed) and writes the route table from cfg. No link moves: call
// Restore with what the replaced maps held, then Attach. It returns a *MapIncompatibleError when a pinned
// map's type, sizes, flags or BTF layout changed and cfg.MigrateMaps is off.
func Load(cfg Config) (*Datapath, error) {
	cfg = cfg.withDefaults()
	spec, err := loadSpec(cfg)
	if err != nil {
		return nil, err
	}
	return load(cfg, spec)
}

// load is Load with the spec given (tests load an earlier layout with it); cfg has its defaults.
func load(cfg Config, spec *ebpf.CollectionSpec) (*Datapath, error) {
	objs, carriedFlags, err := loadObjects(spec, cfg.PinRoot, cfg.MigrateMaps, cfg.Logger)
	if err != nil {
		return nil, err
	}
	d := &Datapath{
		Reader: &Reader{pods: objs.Pods, enis: objs.Enis, routes: objs.Routes, counters: objs.Counters, podStats: objs.PodStats},
		cfg:    cfg,
		log:    cfg.Logger,
		objs:   objs,
		mode:   cfg.Attach,
	}
	d.vpc, d.nodeIPs = slices.Clone(cfg.VPCCIDRs), slices.Clone(cfg.NodeIPs)
	if err := d.writeRoutes(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.recoverPolicies(carriedFlags); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Restore writes the entries of these ENIs and pods, and nothing else: no program is attached, so it may
// run between Load and Attach. Entries already there are overwritten; others are left.
func (d *Datapath) Restore(enis []ENI, pods []Pod) error {
	for _, e := range enis {
		if err := d.putENIEntry(e); err != nil {
			return fmt.Errorf("restoring: %w", err)
		}
	}
	for _, p := range pods {
		if err := d.PutPodEntry(p); err != nil {
			return fmt.Errorf("restoring: %w", err)
		}
	}
	d.log.Info("datapath entries restored", "enis", len(enis), "pods", len(pods))
	return nil
}

// Attach moves the attachments an earlier agent left (pinned tcx links, cls_bpf filters) to the programs
// Load loaded, prunes those of vanished interfaces, attaches the forward hook (or removes it, with
// Config.NetworkPolicy off), and unpins the maps this version retired.
func (d *Datapath) Attach() error {
	d.mu.Lock()
	err := d.adopt()
	if err == nil && d.cfg.Attach != AttachAuto {
		d.mode = d.cfg.Attach
	}
	mode := d.mode
	d.mu.Unlock()
	if err != nil {
		return err
	}
	if d.cfg.NetworkPolicy {
		err = d.attachForward()
	} else {
		err = detachForward(d.cfg.PinRoot)
	}
	if err != nil {
		return err
	}
	if err := unpinRetiredMaps(d.cfg.PinRoot, d.log); err != nil {
		return err
	}
	d.log.Info("datapath attached", "pin_root", d.cfg.PinRoot, "snat", d.cfg.SNAT, "attach", mode.String(), "links", pinnedLinks(d.cfg.PinRoot))
	return nil
}
