package eniconfig

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/eniwire/eniwire/controller/subnet"
)

// parse reads an ENIConfig object and checks its spec: a subnet id is required, security group ids are
// optional (the node's primary ENI's groups then apply).
func parse(u *unstructured.Unstructured) parsed {
	c := subnet.ENIConfig{Name: u.GetName()}
	invalid := func(format string, args ...any) parsed {
		return parsed{config: c, err: fmt.Errorf("ENIConfig %s: "+format, append([]any{c.Name}, args...)...)}
	}
	subnet, _, err := unstructured.NestedString(u.Object, "spec", "subnet")
	if err != nil {
		return invalid("spec.subnet: %v", err)
	}
	if !strings.HasPrefix(subnet, "subnet-") {
		return invalid("spec.subnet %q is not a subnet id (subnet-...)", subnet)
	}
	groups, _, err := unstructured.NestedStringSlice(u.Object, "spec", "securityGroups")
	if err != nil {
		return invalid("spec.securityGroups: %v", err)
	}
	for _, g := range groups {
		if !strings.HasPrefix(g, "sg-") {
			return invalid("spec.securityGroups: %q is not a security group id (sg-...)", g)
		}
	}
	c.Subnet, c.SecurityGroups = subnet, groups
	return parsed{config: c}
}
