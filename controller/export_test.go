package controller

// PodsWaitingForIP is what the pool grows for beyond its warm target (addLine.demand): the ADDs waiting for an
// IP and those answered "no IP" lately. Exported for the tests of package controller_test only.
func (n *Node) PodsWaitingForIP() int { return n.ipam.line.demand(n.clock.Now()) }
