package subnet_test

import (
	"testing"

	"github.com/eniwire/eniwire/controller/subnet"
)

func TestTheGatewayIsTheFirstHostAddressOfTheSubnet(t *testing.T) {
	for _, c := range []struct{ cidr, want string }{
		{"10.0.0.0/20", "10.0.0.1"},
		{"100.64.32.0/20", "100.64.32.1"},
		{"10.0.3.7/20", "10.0.0.1"}, // host bits set: the subnet's own first address still
		{"not a CIDR", ""},
		{"", ""},
	} {
		if got := subnet.Gateway(c.cidr); got != c.want {
			t.Errorf("Gateway(%q) = %q, want %q", c.cidr, got, c.want)
		}
	}
}
