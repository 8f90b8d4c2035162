package controller

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// eniSync keeps the datapath's ENIs in step with the books: up once usable, down once not. Who may touch it:
// only the Run loop calls sync; any goroutine asks isUp and broken (mu guards up and failing).
type eniSync struct {
	books *books
	dp    dptypes.Driver
	log   *slog.Logger

	mu sync.RWMutex
	// up are the ENIs the datapath has brought up, by id: only their IPs are handed to pods, since a pod of an
	// ENI whose interface has not appeared yet cannot be routed.
	up map[string]dptypes.ENI
	// failing are the ENIs whose ENIUp failed last time, with the error, so the failure is logged once, not
	// per round.
	failing map[string]error
	// cameUp is told each ENI the datapath has just brought up: its pods' entries must name its interface,
	// which is a new one when the ENI was detached and attached again.
	cameUp func(eniID string)
}

// isUp reports whether the datapath has brought the ENI up.
func (s *eniSync) isUp(id string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.up[id]
	return ok
}

// anyUp reports whether the datapath has brought up an ENI for which servable holds.
func (s *eniSync) anyUp(servable func(eniID, ip string) bool) bool {
	s.mu.RLock()
	ids := slices.Collect(maps.Keys(s.up))
	s.mu.RUnlock()
	for _, id := range ids {
		if servable(id, "") {
			return true
		}
	}
	return false
}

// sync brings ENIs that became usable up and the ones that stopped being usable down.
func (s *eniSync) sync(ctx context.Context) {
	var (
		usable     map[string]dptypes.ENI
		unreadable map[string]error
	)
	s.books.View(func(st *journal.State) { usable, unreadable = usableENIs(st) })
	for id, err := range unreadable {
		s.fail(id, err)
	}
	for id, e := range usable {
		if s.isUp(id) {
			continue
		}
		if err := s.dp.ENIUp(ctx, e); err != nil {
			s.fail(id, err)
			continue
		}
		s.mu.Lock()
		delete(s.failing, id)
		s.up[id] = e
		s.mu.Unlock()
		s.cameUp(id)
	}
	s.mu.RLock()
	var down []dptypes.ENI
	for id, e := range s.up {
		if _, ok := usable[id]; !ok {
			down = append(down, e)
		}
	}
	s.mu.RUnlock()
	for _, e := range down {
		if err := s.dp.ENIDown(ctx, e); err != nil {
			s.log.Warn("taking ENI datapath down", "eni", e.ID, "error", err)
			continue
		}
		s.mu.Lock()
		delete(s.up, e.ID)
		s.mu.Unlock()
	}
	s.mu.Lock()
	for id := range s.failing {
		if _, ok := usable[id]; !ok && unreadable[id] == nil {
			delete(s.failing, id)
		}
	}
	s.mu.Unlock()
}

// fail notes that the ENI could not be brought up, with why, logging it the first time only.
func (s *eniSync) fail(id string, err error) {
	s.mu.Lock()
	_, logged := s.failing[id]
	s.failing[id] = err
	s.mu.Unlock()
	if !logged {
		s.log.Warn("bringing ENI datapath up; its IPs wait", "eni", id, "error", err)
	}
}

// broken returns why the datapath can wire no pod, or "": it has none of the node's ENIs up, and bringing one
// up failed. (An ENI whose interface has not appeared yet fails too, but the primary ENI is up meanwhile.)
func (s *eniSync) broken() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.up) > 0 || len(s.failing) == 0 {
		return ""
	}
	ids := slices.Sorted(maps.Keys(s.failing))
	return fmt.Sprintf("no ENI is up; bringing %s up: %v", ids[0], s.failing[ids[0]])
}
