package controller

import (
	"context"
	"log/slog"
	"sync"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// eniSync keeps the datapath's ENIs in step with the books: up once usable, down once not. Who may touch it:
// only the Run loop calls sync; any goroutine asks isUp (mu guards up).
type eniSync struct {
	books *books
	dp    dptypes.Driver
	log   *slog.Logger

	mu sync.RWMutex
	// up are the ENIs the datapath has brought up, by id: only their IPs are handed to pods, since a pod of an
	// ENI whose interface has not appeared yet cannot be routed.
	up map[string]dptypes.ENI
	// failing are the ENIs whose ENIUp failed last time, so the failure is logged once, not per round.
	failing map[string]bool
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

// sync brings ENIs that became usable up and the ones that stopped being usable down.
func (s *eniSync) sync(ctx context.Context) {
	var usable map[string]dptypes.ENI
	s.books.View(func(st *journal.State) { usable = usableENIs(st) })
	for id, e := range usable {
		if s.isUp(id) {
			continue
		}
		if err := s.dp.ENIUp(ctx, e); err != nil {
			if !s.failing[id] {
				s.failing[id] = true
				s.log.Warn("bringing ENI datapath up; its IPs wait", "eni", id, "error", err)
			}
			continue
		}
		delete(s.failing, id)
		s.mu.Lock()
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
	for id := range s.failing {
		if _, ok := usable[id]; !ok {
			delete(s.failing, id)
		}
	}
}
