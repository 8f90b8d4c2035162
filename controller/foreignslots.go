package controller

// ENIs someone else attached to the instance (a trunk ENI, another CNI's during a migration, an operator's)
// take device indexes like ours. Counting only our own ENIs against the instance's limit made the node plan
// an ENI for the last slot, create it, find no device index, delete it, and plan it again every round (159
// creates and 159 deletes in five virtual minutes). The pool counts them (what the last reconcile saw), and
// an attach that still finds no free index pauses the creates as a refusal does (refusals.go).

import (
	"fmt"
	"strings"

	"github.com/eniwire/eniwire/controller/pool"
)

// codeNoDeviceIndex names, among EC2's refusal codes, the node's own refusal of an attach with no free device
// index.
const codeNoDeviceIndex = "NoFreeDeviceIndex"

// limitsNow are the pool's limits with the ENI limit in force, less the ENIs others hold on the instance.
func (m *poolManager) limitsNow() pool.Limits {
	l := m.limits
	l.MaxENIs = max(m.eni.MaxENIs()-len(m.eni.Foreign()), 1)
	return l
}

// foreignNote names the ENIs others hold on the instance, for a status line, or "".
func (m *poolManager) foreignNote() string {
	f := m.eni.Foreign()
	if len(f) == 0 {
		return ""
	}
	return fmt.Sprintf("%d of the instance's %d ENI slots are held by ENIs eniwire does not manage (%s)",
		len(f), m.eni.MaxENIs(), strings.Join(f, ", "))
}
