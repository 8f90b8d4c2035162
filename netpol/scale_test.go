package netpol

import "github.com/eniwire/eniwire/netpol/netpoltest"

// build feeds the whole cluster to a new Compiler, as the agent does its informers' initial lists.
func build(s *netpoltest.Cluster, node string) *Compiler {
	c := NewCompiler(node)
	c.Hold()
	defer c.Flush()
	s.FeedTo(c)
	return c
}
