package snat

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The AWS VPC CNI's variables, with the same meaning.
const (
	EnvExternalSNAT     = "AWS_VPC_K8S_CNI_EXTERNALSNAT"
	EnvExcludeSNATCIDRs = "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS"
	EnvRandomizeSNAT    = "AWS_VPC_K8S_CNI_RANDOMIZESNAT"
)

// FromEnv completes base (primary IP and interface, VPC CIDRs) from the AWS VPC CNI's
// environment variables, read through getenv (os.Getenv in the agent).
func FromEnv(getenv func(string) string, base Config) (Config, error) {
	cfg := base
	cfg.ExcludeCIDRs = append([]netip.Prefix(nil), base.ExcludeCIDRs...)
	if v := strings.TrimSpace(getenv(EnvExternalSNAT)); v != "" {
		ext, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, EnvExternalSNAT, v, err)
		}
		cfg.External = ext
	}
	for _, s := range strings.Split(getenv(EnvExcludeSNATCIDRs), ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil || !p.Addr().Is4() {
			return Config{}, fmt.Errorf("%w: %s entry %q is not an IPv4 CIDR", ErrInvalidConfig, EnvExcludeSNATCIDRs, s)
		}
		cfg.ExcludeCIDRs = append(cfg.ExcludeCIDRs, p.Masked())
	}
	switch v := strings.TrimSpace(getenv(EnvRandomizeSNAT)); v {
	case "", "prng":
		cfg.Randomize = RandomizePRNG
	case "hashrandom":
		cfg.Randomize = RandomizeHash
	case "none":
		cfg.Randomize = RandomizeNone
	default:
		return Config{}, fmt.Errorf("%w: %s=%q (want prng, hashrandom or none)", ErrInvalidConfig, EnvRandomizeSNAT, v)
	}
	return cfg, nil
}
