package netpol

import (
	"cmp"
	"net/netip"
	"slices"
)

// memberSet is the pods a pod peer matches, kept by the Compiler, with their addresses in order: a pod's
// state lists its peers' prefixes sorted, and peers handed over sorted make fold's sort nearly free. The
// order is restored lazily, once per change of the set, for every pod of the node that reads it.
type memberSet struct {
	pods   map[*pod]struct{}
	addrs  []memberAddr
	sorted bool
}

type memberAddr struct {
	addr netip.Addr
	pod  *pod
}

func newMemberSet() *memberSet { return &memberSet{pods: map[*pod]struct{}{}, sorted: true} }

func (s *memberSet) add(q *pod) {
	if _, ok := s.pods[q]; ok {
		return
	}
	s.pods[q] = struct{}{}
	for _, a := range q.addrs {
		s.addrs = append(s.addrs, memberAddr{a, q})
		s.sorted = false
	}
}

// remove takes q out of the set and says whether it was in.
func (s *memberSet) remove(q *pod) bool {
	if _, ok := s.pods[q]; !ok {
		return false
	}
	delete(s.pods, q)
	s.addrs = slices.DeleteFunc(s.addrs, func(m memberAddr) bool { return m.pod == q })
	return true
}

// each calls f for each address of each member, in address order.
func (s *memberSet) each(f func(netip.Addr, *pod)) {
	if !s.sorted {
		slices.SortFunc(s.addrs, func(a, b memberAddr) int {
			return cmp.Or(a.addr.Compare(b.addr), cmp.Compare(a.pod.key.namespace, b.pod.key.namespace), cmp.Compare(a.pod.key.name, b.pod.key.name))
		})
		s.sorted = true
	}
	for _, m := range s.addrs {
		f(m.addr, m.pod)
	}
}
