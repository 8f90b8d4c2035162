package main

import (
	"os"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/controller/eniconfig"
)

func TestCustomNetworkingSettings(t *testing.T) {
	for _, env := range []string{"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "MY_NODE_NAME", "ENI_CONFIG_LABEL_DEF", "ENI_CONFIG_ANNOTATION_DEF", "KUBECONFIG"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	t.Run("are off by default, with the AWS VPC CNI's keys", func(t *testing.T) {
		s, err := parseSettings(nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.customNetwork || s.eniConfigLabel != eniconfig.DefaultLabel || s.eniConfigAnnotation != eniconfig.DefaultAnnotation {
			t.Errorf("custom network %v, label %q, annotation %q", s.customNetwork, s.eniConfigLabel, s.eniConfigAnnotation)
		}
	})
	t.Run("need the node's name when on", func(t *testing.T) {
		if _, err := parseSettings([]string{"-custom-network=true"}); err == nil || !strings.Contains(err.Error(), "MY_NODE_NAME") {
			t.Errorf("err = %v, want one naming MY_NODE_NAME", err)
		}
		t.Setenv("MY_NODE_NAME", "node-1")
		s, err := parseSettings([]string{"-custom-network=true", "-eni-config-label=topology.kubernetes.io/zone"})
		if err != nil || !s.customNetwork || s.nodeName != "node-1" || s.eniConfigLabel != "topology.kubernetes.io/zone" {
			t.Errorf("settings %+v, err %v", s, err)
		}
	})
	t.Run("refuse a value that is no bool", func(t *testing.T) {
		if _, err := parseSettings([]string{"-custom-network=yes please"}); err == nil {
			t.Error("no error")
		}
	})
}

func TestExternalSNATNeedsTheServiceCIDRs(t *testing.T) {
	for _, env := range []string{"AWS_VPC_K8S_CNI_EXTERNALSNAT", "ENIWIRE_SERVICE_CIDRS", "ENIWIRE_DATAPATH"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	t.Run("the BPF datapath refuses to start without them, naming the setting", func(t *testing.T) {
		t.Setenv("AWS_VPC_K8S_CNI_EXTERNALSNAT", "true")
		_, err := parseSettings(nil)
		if err == nil || !strings.Contains(err.Error(), "ENIWIRE_SERVICE_CIDRS") {
			t.Errorf("err = %v, want a refusal naming ENIWIRE_SERVICE_CIDRS", err)
		}
	})
	for _, c := range []struct {
		what string
		args []string
	}{
		{"starts with them", []string{"-external-snat=true", "-service-cidrs=10.96.0.0/16"}},
		{"starts without them when the node translates", []string{"-external-snat=false"}},
		{"starts without them with the host-route datapath, where the host routes every pod packet", []string{"-external-snat=true", "-datapath=hostroute"}},
	} {
		t.Run(c.what, func(t *testing.T) {
			if _, err := parseSettings(c.args); err != nil {
				t.Errorf("parseSettings(%q): %v", c.args, err)
			}
		})
	}
}

func TestIPv6ModeSettings(t *testing.T) {
	for _, env := range []string{"ENABLE_IPv6", "ENABLE_PREFIX_DELEGATION", "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "MY_NODE_NAME",
		"ENIWIRE_SERVICE_CIDRS", "ENIWIRE_DATAPATH"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	t.Setenv("MY_NODE_NAME", "node-1")
	for _, c := range []struct {
		what    string
		args    []string
		refusal string // "" when the settings are taken
	}{
		{"are off by default", nil, ""},
		{"are taken with prefix delegation and the IPv6 Service range", []string{"-enable-ipv6=true", "-enable-prefix-delegation=true",
			"-service-cidrs=fd00:10:96::/112"}, ""},
		{"refuse prefix delegation off, naming it", []string{"-enable-ipv6=true", "-service-cidrs=fd00:10:96::/112"}, "ENABLE_PREFIX_DELEGATION"},
		{"refuse custom networking, naming it", []string{"-enable-ipv6=true", "-enable-prefix-delegation=true", "-custom-network=true",
			"-service-cidrs=fd00:10:96::/112"}, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"},
		{"refuse no IPv6 Service range, naming the setting", []string{"-enable-ipv6=true", "-enable-prefix-delegation=true",
			"-service-cidrs=10.96.0.0/16"}, "ENIWIRE_SERVICE_CIDRS"},
	} {
		t.Run(c.what, func(t *testing.T) {
			s, err := parseSettings(c.args)
			switch {
			case c.refusal == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refusal == "" && s.ipv6 != (len(c.args) > 0):
				t.Errorf("ipv6 = %v for %v", s.ipv6, c.args)
			case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
				t.Errorf("err = %v, want a refusal naming %s", err, c.refusal)
			}
		})
	}
}

// ENABLE_IPv4 makes ENABLE_IPv6 dual-stack mode: taken with or without prefix delegation, refused with
// custom networking and without the IPv6 Service range; left empty it follows ENABLE_IPv6 (IPv4 pods
// without it, IPv6 mode with it); both families off is refused.
func TestDualStackModeSettings(t *testing.T) {
	for _, env := range []string{"ENABLE_IPv4", "ENABLE_IPv6", "ENABLE_PREFIX_DELEGATION", "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG",
		"MY_NODE_NAME", "ENIWIRE_SERVICE_CIDRS", "ENIWIRE_DATAPATH"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	t.Setenv("MY_NODE_NAME", "node-1")
	const v6Services = "-service-cidrs=fd00:10:96::/112"
	for _, c := range []struct {
		what       string
		args       []string
		ipv4, ipv6 bool
		refusal    string // "" when the settings are taken
	}{
		{"IPv4 by default", nil, true, false, ""},
		{"IPv6 mode with ENABLE_IPv6 alone", []string{"-enable-ipv6=true", "-enable-prefix-delegation=true", v6Services}, false, true, ""},
		{"dual-stack with secondary IPs", []string{"-enable-ipv6=true", "-enable-ipv4=true", v6Services}, true, true, ""},
		{"dual-stack with prefixes", []string{"-enable-ipv6=true", "-enable-ipv4=true", "-enable-prefix-delegation=true", v6Services}, true, true, ""},
		{"dual-stack refuses custom networking, naming it", []string{"-enable-ipv6=true", "-enable-ipv4=true", "-custom-network=true", v6Services},
			false, false, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"},
		{"dual-stack refuses no IPv6 Service range", []string{"-enable-ipv6=true", "-enable-ipv4=true", "-service-cidrs=10.96.0.0/16"},
			false, false, "ENIWIRE_SERVICE_CIDRS"},
		{"no family at all is refused", []string{"-enable-ipv4=false"}, false, false, "ENABLE_IPv4"},
		{"a bad ENABLE_IPv4 is refused", []string{"-enable-ipv4=maybe"}, false, false, "--enable-ipv4"},
	} {
		t.Run(c.what, func(t *testing.T) {
			s, err := parseSettings(c.args)
			switch {
			case c.refusal == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refusal == "" && (s.ipv4 != c.ipv4 || s.ipv6 != c.ipv6):
				t.Errorf("ipv4 = %v, ipv6 = %v for %v; want %v, %v", s.ipv4, s.ipv6, c.args, c.ipv4, c.ipv6)
			case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), c.refusal)):
				t.Errorf("err = %v, want a refusal naming %s", err, c.refusal)
			}
		})
	}
}

func TestNetworkPolicyEnforcementSetting(t *testing.T) {
	for _, env := range []string{"ENABLE_NETWORK_POLICY", "ENIWIRE_DATAPATH"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
	for _, c := range []struct {
		name    string
		env     string
		args    []string
		enforce bool
	}{
		{"is on by default with the bpf datapath", "", nil, true},
		{"is off entirely when the setting says false", "false", nil, false},
		{"the flag wins over the environment", "false", []string{"-enable-network-policy=true"}, true},
		{"is never on with the hostroute datapath", "", []string{"-datapath=hostroute"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("ENABLE_NETWORK_POLICY", c.env)
			}
			s, err := parseSettings(c.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.enforcesNetworkPolicy(); got != c.enforce {
				t.Errorf("enforces %v, want %v", got, c.enforce)
			}
		})
	}
	if _, err := parseSettings([]string{"-enable-network-policy=maybe"}); err == nil {
		t.Error("a value that is no bool was accepted")
	}
}
