package controller

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/eniwire/eniwire/controller/journal"
	"github.com/eniwire/eniwire/datapath/dptypes"
)

// eniSync keeps the datapath's ENIs in step with the books: up once usable, down once not. Who may touch it:
// only the Run loop (up has no lock).
type eniSync struct {
	books *books
	dp    dptypes.Driver
	log   *slog.Logger
	// up are the ENIs the datapath has brought up, by id.
	up map[string]dptypes.ENI
}

// sync brings ENIs that became usable up and the ones that stopped being usable down.
func (s *eniSync) sync(ctx context.Context) {
	var usable map[string]dptypes.ENI
	s.books.View(func(st *journal.State) { usable = usableENIs(st) })
	for id, e := range usable {
		if _, up := s.up[id]; up {
			continue
		}
		if err := s.dp.ENIUp(ctx, e); err != nil {
			s.log.Warn("bringing ENI datapath up", "eni", id, "error", err)
			continue
		}
		s.up[id] = e
	}
	for id, e := range s.up {
		if _, ok := usable[id]; ok {
			continue
		}
		if err := s.dp.ENIDown(ctx, e); err != nil {
			s.log.Warn("taking ENI datapath down", "eni", id, "error", err)
			continue
		}
		delete(s.up, id)
	}
}

// Gateway returns the first host address of cidr (the VPC router of that subnet), or "" if cidr is invalid.
func Gateway(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return ""
	}
	return p.Masked().Addr().Next().String()
}
