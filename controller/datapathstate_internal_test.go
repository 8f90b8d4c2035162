package controller

import (
	"net/netip"
	"testing"

	"github.com/eniwire/eniwire/controller/api"
)

// The datapath takes parsed addresses: an assignment whose address, MAC or subnet does not parse is refused
// here, once, with an error, where the datapath used to take the string and skip what it could not parse
// (PodDown answered success for a pod whose IP it could not read, leaving its entry and route).
func TestAnAssignmentReachesTheDatapathParsedOrNotAtAll(t *testing.T) {
	good := api.Assignment{Attachment: api.Attachment{ContainerID: "c1", IfName: "eth0"}, IP: "10.0.1.20",
		ENI: "eni-1", ENIMAC: "02:00:00:00:00:01", DeviceIndex: 1, SubnetCIDR: "10.0.1.0/24"}
	with := func(f func(*api.Assignment)) api.Assignment { a := good; f(&a); return a }
	for _, tc := range []struct {
		name    string
		a       api.Assignment
		wantErr bool
	}{
		{"an assignment with valid addresses is parsed", good, false},
		{"an IP that is no address is refused", with(func(a *api.Assignment) { a.IP = "10.0.1.300" }), true},
		{"a missing IP is refused", with(func(a *api.Assignment) { a.IP = "" }), true},
		{"a MAC that does not parse is refused", with(func(a *api.Assignment) { a.ENIMAC = "02:00:00" }), true},
		{"a subnet that does not parse is refused", with(func(a *api.Assignment) { a.SubnetCIDR = "10.0.1.0" }), true},
		{"an ENI the books no longer know leaves the ENI's id alone", with(func(a *api.Assignment) { a.ENIMAC, a.SubnetCIDR = "", "" }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := podOf(tc.a)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("podOf(%+v) = %+v, want an error", tc.a, pod)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.IP.String() != tc.a.IP || pod.ENI.ID != tc.a.ENI || pod.ENI.MAC.String() != tc.a.ENIMAC {
				t.Errorf("podOf = %+v, want IP %s on ENI %s (MAC %q)", pod, tc.a.IP, tc.a.ENI, tc.a.ENIMAC)
			}
			if tc.a.SubnetCIDR != "" && (pod.ENI.Subnet.String() != tc.a.SubnetCIDR || pod.ENI.Gateway != netip.MustParseAddr("10.0.1.1")) {
				t.Errorf("podOf's ENI = %+v, want subnet %s via 10.0.1.1", pod.ENI, tc.a.SubnetCIDR)
			}
		})
	}
}
