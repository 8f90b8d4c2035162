package metadata

import (
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// instanceTypesText is the instance-type facts shipped with the binaries (hack/instancetypes writes it): its
// header says where and when they were taken.
//
//go:embed instancetypes.txt
var instanceTypesText string

// knownTypes is instanceTypesText parsed once.
var knownTypes = sync.OnceValues(func() (map[string]Limits, string) {
	out, taken, err := parseInstanceTypes(instanceTypesText)
	if err != nil {
		panic(fmt.Sprintf("metadata: the shipped instance types: %v", err))
	}
	return out, taken
})

// KnownLimits returns the shipped facts of instanceType, as LoadLimits would read them from EC2 (a bare-metal
// type has no hypervisor), and whether they are complete: a type that is not listed, or whose vCPUs are not
// known, is not.
func KnownLimits(instanceType string) (Limits, bool) {
	m, _ := knownTypes()
	l, ok := m[instanceType]
	return l, ok && l.VCPUs > 0
}

// KnownTypes lists the instance types whose facts are shipped complete, sorted, and says where and when
// they were taken.
func KnownTypes() (types []string, taken string) {
	m, taken := knownTypes()
	for name, l := range m {
		if l.VCPUs > 0 {
			types = append(types, name)
		}
	}
	sort.Strings(types)
	return types, taken
}

// parseInstanceTypes reads the shipped format: "#" lines (the first says where and when the facts were
// taken), then one type a line: name, ENIs of the default card, IPv4 per ENI, network cards, hypervisor
// (nitro, xen, metal or unknown) and vCPUs (0: unknown).
func parseInstanceTypes(text string) (map[string]Limits, string, error) {
	out := map[string]Limits{}
	var taken string
	for i, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			if taken == "" {
				taken = strings.TrimSpace(rest)
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 6 {
			return nil, "", fmt.Errorf("line %d: want 6 fields, got %d", i+1, len(f))
		}
		var n [4]int
		for j, s := range []string{f[1], f[2], f[3], f[5]} {
			v, err := strconv.Atoi(s)
			if err != nil {
				return nil, "", fmt.Errorf("line %d: %w", i+1, err)
			}
			n[j] = v
		}
		l := Limits{MaxENIs: n[0], IPv4PerENI: n[1], NetworkCards: n[2], VCPUs: n[3]}
		switch f[4] {
		case "nitro", "xen":
			l.Hypervisor = f[4]
		case "metal", "unknown":
		default:
			return nil, "", fmt.Errorf("line %d: hypervisor %q", i+1, f[4])
		}
		out[f[0]] = l
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("no instance types")
	}
	return out, taken, nil
}
