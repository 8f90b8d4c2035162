package fleet

// ipamdAddrs are the pod addresses an ipamd model holds on one ENI, and which of them pods use.
type ipamdAddrs struct {
	addrs []string
	used  map[string]bool
}

// free is how many of the addresses no pod uses.
func (a *ipamdAddrs) free() int { return len(a.addrs) - len(a.used) }

// assignPod gives pod the first free address of enis, taken in the order given, and records it in pods; a pod
// that has an address keeps it.
func assignPod(pods map[string]string, pod string, enis []*ipamdAddrs) (string, error) {
	if ip, ok := pods[pod]; ok {
		return ip, nil
	}
	for _, e := range enis {
		for _, ip := range e.addrs {
			if !e.used[ip] {
				e.used[ip] = true
				pods[pod] = ip
				return ip, nil
			}
		}
	}
	return "", errNoIP
}

// releasePod frees pod's address on whichever of enis holds it.
func releasePod(pods map[string]string, pod string, enis []*ipamdAddrs) {
	ip, ok := pods[pod]
	if !ok {
		return
	}
	delete(pods, pod)
	for _, e := range enis {
		delete(e.used, ip)
	}
}

// idSet is the set of an ipamd model's ENI ids (its books).
func idSet[V any](enis map[string]V) map[string]bool {
	out := make(map[string]bool, len(enis))
	for id := range enis {
		out[id] = true
	}
	return out
}
