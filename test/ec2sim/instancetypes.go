package ec2sim

import "sort"

// InstanceType holds the published network limits of an EC2 instance type.
type InstanceType struct {
	Name string `json:"name"`
	// MaxENIs is MaximumNetworkInterfaces over all network cards.
	MaxENIs int `json:"maxENIs"`
	// IPv4PerENI is Ipv4AddressesPerInterface (the primary IP and /28 prefixes each take one slot).
	IPv4PerENI int `json:"ipv4PerENI"`
	// IPv6PerENI is Ipv6AddressesPerInterface (/80 prefixes each take one slot); every type here has as many
	// as IPv4PerENI, as AWS publishes them.
	IPv6PerENI int `json:"ipv6PerENI"`
	// Cards is the maximum ENIs of each network card; one element for single-card types.
	Cards []int `json:"cards"`
	// Hypervisor is "nitro" or "xen" (DescribeInstanceTypes' Hypervisor); only Nitro types take prefixes.
	Hypervisor  string  `json:"hypervisor"`
	VCPUs       int     `json:"vcpus"`
	MemoryMiB   int     `json:"memoryMiB"`
	Performance string  `json:"performance"`
	Baseline    float64 `json:"baselineGbps"`
	Peak        float64 `json:"peakGbps"`
}

// instanceTypes are AWS's published figures (Ipv4AddressesPerInterface, MaximumNetworkInterfaces and the
// network cards, as DescribeInstanceTypes reports them).
var instanceTypes = map[string]InstanceType{
	"t3.micro":     {MaxENIs: 2, IPv4PerENI: 2, Cards: []int{2}, VCPUs: 2, MemoryMiB: 1024, Performance: "Up to 5 Gigabit", Baseline: 0.064, Peak: 5},
	"t3.small":     {MaxENIs: 3, IPv4PerENI: 4, Cards: []int{3}, VCPUs: 2, MemoryMiB: 2048, Performance: "Up to 5 Gigabit", Baseline: 0.128, Peak: 5},
	"t3.medium":    {MaxENIs: 3, IPv4PerENI: 6, Cards: []int{3}, VCPUs: 2, MemoryMiB: 4096, Performance: "Up to 5 Gigabit", Baseline: 0.256, Peak: 5},
	"t3.large":     {MaxENIs: 3, IPv4PerENI: 12, Cards: []int{3}, VCPUs: 2, MemoryMiB: 8192, Performance: "Up to 5 Gigabit", Baseline: 0.512, Peak: 5},
	"m5.large":     {MaxENIs: 3, IPv4PerENI: 10, Cards: []int{3}, VCPUs: 2, MemoryMiB: 8192, Performance: "Up to 10 Gigabit", Baseline: 0.75, Peak: 10},
	"m5.xlarge":    {MaxENIs: 4, IPv4PerENI: 15, Cards: []int{4}, VCPUs: 4, MemoryMiB: 16384, Performance: "Up to 10 Gigabit", Baseline: 1.25, Peak: 10},
	"m5.2xlarge":   {MaxENIs: 4, IPv4PerENI: 15, Cards: []int{4}, VCPUs: 8, MemoryMiB: 32768, Performance: "Up to 10 Gigabit", Baseline: 2.5, Peak: 10},
	"m5.4xlarge":   {MaxENIs: 8, IPv4PerENI: 30, Cards: []int{8}, VCPUs: 16, MemoryMiB: 65536, Performance: "Up to 10 Gigabit", Baseline: 5, Peak: 10},
	"m5.24xlarge":  {MaxENIs: 15, IPv4PerENI: 50, Cards: []int{15}, VCPUs: 96, MemoryMiB: 393216, Performance: "25 Gigabit", Baseline: 25, Peak: 25},
	"m4.large":     {MaxENIs: 2, IPv4PerENI: 10, Cards: []int{2}, VCPUs: 2, MemoryMiB: 8192, Performance: "Moderate", Baseline: 0.45, Peak: 0.45, Hypervisor: "xen"},
	"m4.4xlarge":   {MaxENIs: 8, IPv4PerENI: 30, Cards: []int{8}, VCPUs: 16, MemoryMiB: 65536, Performance: "High", Baseline: 2, Peak: 2, Hypervisor: "xen"},
	"c5.large":     {MaxENIs: 3, IPv4PerENI: 10, Cards: []int{3}, VCPUs: 2, MemoryMiB: 4096, Performance: "Up to 10 Gigabit", Baseline: 0.75, Peak: 10},
	"c5.xlarge":    {MaxENIs: 4, IPv4PerENI: 15, Cards: []int{4}, VCPUs: 4, MemoryMiB: 8192, Performance: "Up to 10 Gigabit", Baseline: 1.25, Peak: 10},
	"c5.18xlarge":  {MaxENIs: 15, IPv4PerENI: 50, Cards: []int{15}, VCPUs: 72, MemoryMiB: 147456, Performance: "25 Gigabit", Baseline: 25, Peak: 25},
	"p4d.24xlarge": {MaxENIs: 60, IPv4PerENI: 50, Cards: []int{15, 15, 15, 15}, VCPUs: 96, MemoryMiB: 1179648, Performance: "4x 100 Gigabit", Baseline: 100, Peak: 100},
}

func init() {
	for name, it := range instanceTypes {
		it.Name = name
		if it.IPv6PerENI == 0 {
			it.IPv6PerENI = it.IPv4PerENI
		}
		if it.Hypervisor == "" {
			it.Hypervisor = "nitro"
		}
		instanceTypes[name] = it
	}
}

// Nitro says whether the type is built on the Nitro System, which /28 prefixes need.
func (it InstanceType) Nitro() bool { return it.Hypervisor == "nitro" }

// InstanceTypes lists the types the simulator knows, sorted by name.
func InstanceTypes() []InstanceType {
	out := make([]InstanceType, 0, len(instanceTypes))
	for _, it := range instanceTypes {
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupInstanceType returns the limits of a type.
func LookupInstanceType(name string) (InstanceType, bool) {
	it, ok := instanceTypes[name]
	return it, ok
}
