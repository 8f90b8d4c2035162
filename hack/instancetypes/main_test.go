package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A limits table in the input's shape: a multi-card type counts its default card's ENIs, bare metal has no
// hypervisor, a plain metal size takes its family's largest vCPUs.
const sample = `package vpc

var limits = map[string]Limits{
	"x9.24xlarge": {ENILimit: 30, IPv4Limit: 50, DefaultNetworkCardIndex: 1,
		NetworkCards: []NetworkCard{{MaximumNetworkInterfaces: 10, NetworkCardIndex: 0}, {MaximumNetworkInterfaces: 20, NetworkCardIndex: 1}},
		HypervisorType: "nitro", IsBareMetal: false},
	"x9.metal": {ENILimit: 15, IPv4Limit: 50, NetworkCards: []NetworkCard{{MaximumNetworkInterfaces: 15, NetworkCardIndex: 0}},
		HypervisorType: "unknown", IsBareMetal: true},
	"x9.large": {ENILimit: 3, IPv4Limit: 10, NetworkCards: []NetworkCard{{MaximumNetworkInterfaces: 3, NetworkCardIndex: 0}},
		HypervisorType: "xen", IsBareMetal: false},
	"mac9.metal": {ENILimit: 8, IPv4Limit: 30, NetworkCards: []NetworkCard{{MaximumNetworkInterfaces: 8, NetworkCardIndex: 0}},
		HypervisorType: "unknown", IsBareMetal: true},
}
`

func TestTheGeneratorWritesOneRowPerType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.go")
	if err := os.WriteFile(path, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	rows, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	deriveVCPUs(rows)
	var out bytes.Buffer
	if err := write(&out, rows, "example@0000", "2026-01-02"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(out.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			got = append(got, line)
		}
	}
	want := []string{"mac9.metal 8 30 1 metal 0", "x9.24xlarge 20 50 2 nitro 96", "x9.large 3 10 1 xen 2", "x9.metal 15 50 1 metal 96"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(out.String(), "# eniwire instance-type facts, taken 2026-01-02 from example@0000 ") {
		t.Errorf("header %q", strings.SplitN(out.String(), "\n", 2)[0])
	}
}

func TestVCPUsFollowTheSizeName(t *testing.T) {
	for name, want := range map[string]int{
		"m5.large": 2, "m5.xlarge": 4, "m5.24xlarge": 96, "c7i.metal-48xl": 192, "t3.micro": 2, "t2.nano": 1,
		"a1.medium": 1, "hpc7a.12xlarge": 24, "m5.metal": 0, "mac2.metal": 0,
	} {
		if got := vcpusOf(name); got != want {
			t.Errorf("vcpusOf(%s) = %d, want %d", name, got, want)
		}
	}
}
