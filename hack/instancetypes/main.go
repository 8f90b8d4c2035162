// Command instancetypes writes controller/metadata/instancetypes.txt, the instance-type facts eniwirectl
// max-pods answers from without AWS: per type the ENIs of the default network card, the IPv4 addresses per
// ENI, the network cards, the hypervisor and the default vCPUs.
//
// Its input is the AWS VPC CNI's table of limits per type (pkg/vpc/vpc_ip_resource_limit.go in
// github.com/aws/amazon-vpc-cni-k8s, which that project generates from DescribeInstanceTypes in every
// commercial Region), read as Go syntax. That table has no vCPUs, which only kubelet's ceiling needs (110 pods up
// to 30 vCPUs, 250 above): they are derived from the size in the type's name (vcpusOf). Run:
//
//	go run ./hack/instancetypes -in vpc_ip_resource_limit.go -source 'aws/amazon-vpc-cni-k8s@<commit>' \
//	    -taken YYYY-MM-DD > controller/metadata/instancetypes.txt
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// facts are one type's row.
type facts struct {
	name              string
	enis, ipv4, cards int
	hypervisor        string // nitro, xen, metal (bare metal: no hypervisor) or unknown
	vcpus             int    // 0: not derivable from the name
	defaultCard       int    // the index of the default network card
}

func main() {
	in := flag.String("in", "", "the AWS VPC CNI's vpc_ip_resource_limit.go")
	source := flag.String("source", "", "where the input came from (repository@commit)")
	taken := flag.String("taken", "", "the date the input's facts were taken (YYYY-MM-DD)")
	flag.Parse()
	if *in == "" || *source == "" || *taken == "" {
		log.Fatal("usage: instancetypes -in FILE -source REPO@COMMIT -taken YYYY-MM-DD")
	}
	rows, err := read(*in)
	if err != nil {
		log.Fatal(err)
	}
	deriveVCPUs(rows)
	if err := write(os.Stdout, rows, *source, *taken); err != nil {
		log.Fatal(err)
	}
}

// read walks the file's one map literal from type name to limits.
func read(path string) ([]facts, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var rows []facts
	var walkErr error
	ast.Inspect(f, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok || walkErr != nil {
			return walkErr == nil
		}
		key, ok := kv.Key.(*ast.BasicLit)
		val, ok2 := kv.Value.(*ast.CompositeLit)
		if !ok || !ok2 || key.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(key.Value)
		row, err := rowOf(name, val)
		if err != nil {
			walkErr = err
			return false
		}
		rows = append(rows, row)
		return false
	})
	if walkErr != nil {
		return nil, walkErr
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no instance types found", path)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	return rows, nil
}

// rowOf reads one type's fields: the ENI and IPv4 limits, the network cards (the default card's ENIs are
// the ones a node manages), the hypervisor and whether it is bare metal.
func rowOf(name string, lit *ast.CompositeLit) (facts, error) {
	r := facts{name: name}
	cardENIs := map[int]int{}
	var hypervisor string
	var metal bool
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		field, _ := kv.Key.(*ast.Ident)
		if field == nil {
			continue
		}
		switch field.Name {
		case "ENILimit":
			r.enis = intOf(kv.Value)
		case "IPv4Limit":
			r.ipv4 = intOf(kv.Value)
		case "DefaultNetworkCardIndex":
			r.defaultCard = intOf(kv.Value)
		case "HypervisorType":
			hypervisor, _ = strconv.Unquote(kv.Value.(*ast.BasicLit).Value)
		case "IsBareMetal":
			metal = kv.Value.(*ast.Ident).Name == "true"
		case "NetworkCards":
			for _, c := range kv.Value.(*ast.CompositeLit).Elts {
				idx, max := 0, 0
				for _, ce := range c.(*ast.CompositeLit).Elts {
					ckv := ce.(*ast.KeyValueExpr)
					switch ckv.Key.(*ast.Ident).Name {
					case "NetworkCardIndex":
						idx = intOf(ckv.Value)
					case "MaximumNetworkInterfaces":
						max = intOf(ckv.Value)
					}
				}
				cardENIs[idx] = max
				r.cards++
			}
		}
	}
	if n, ok := cardENIs[r.defaultCard]; ok {
		r.enis = n
	}
	r.cards = max(r.cards, 1)
	switch {
	case hypervisor == "nitro" || hypervisor == "xen":
		r.hypervisor = hypervisor
	case metal:
		r.hypervisor = "metal"
	case hypervisor == "unknown" || hypervisor == "":
		r.hypervisor = "unknown"
	default:
		return r, fmt.Errorf("%s: hypervisor %q", name, hypervisor)
	}
	if r.enis <= 0 || r.ipv4 <= 0 {
		return r, fmt.Errorf("%s: %d ENIs, %d IPv4 per ENI", name, r.enis, r.ipv4)
	}
	return r, nil
}

func intOf(e ast.Expr) int {
	lit, ok := e.(*ast.BasicLit)
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(lit.Value)
	return n
}

// vcpuExceptions are the types whose default vCPUs do not follow their size's name.
var vcpuExceptions = map[string]int{
	"hs1.8xlarge": 16, "m2.4xlarge": 8, "m2.2xlarge": 4, "m2.xlarge": 2, "c1.xlarge": 8, "c1.medium": 2,
	"t1.micro": 1, "m1.small": 1, "m1.medium": 1, "t2.nano": 1, "t2.micro": 1, "t2.small": 1,
	"hpc6id.32xlarge": 64, "hpc7a.12xlarge": 24, "hpc7a.24xlarge": 48, "hpc7a.48xlarge": 96, "hpc7a.96xlarge": 192,
}

var sizeRE = regexp.MustCompile(`^(\d*)xlarge$`)

// vcpusOf derives the default vCPUs from EC2's size names: large 2, xlarge 4, Nxlarge 4N, metal-Nxl 4N;
// nano to medium 2 in the burstable (t) families and 1 elsewhere. A plain metal size is resolved by
// deriveVCPUs; 0 means unknown.
func vcpusOf(name string) int {
	if n, ok := vcpuExceptions[name]; ok {
		return n
	}
	family, size, _ := strings.Cut(name, ".")
	switch size {
	case "nano", "micro", "small", "medium":
		if strings.HasPrefix(family, "t") {
			return 2
		}
		return 1
	case "large":
		return 2
	}
	if m := sizeRE.FindStringSubmatch(size); m != nil {
		if m[1] == "" {
			return 4
		}
		n, _ := strconv.Atoi(m[1])
		return 4 * n
	}
	if rest, ok := strings.CutPrefix(size, "metal-"); ok {
		if n, err := strconv.Atoi(strings.TrimSuffix(rest, "xl")); err == nil {
			return 4 * n
		}
	}
	return 0
}

// deriveVCPUs sets every row's vCPUs; a plain metal type gets its family's largest size's, and stays 0
// (unknown) when the family has no other size.
func deriveVCPUs(rows []facts) {
	largest := map[string]int{}
	for i := range rows {
		rows[i].vcpus = vcpusOf(rows[i].name)
		family, _, _ := strings.Cut(rows[i].name, ".")
		largest[family] = max(largest[family], rows[i].vcpus)
	}
	for i := range rows {
		if family, size, _ := strings.Cut(rows[i].name, "."); size == "metal" {
			rows[i].vcpus = largest[family]
		}
	}
}

func write(w io.Writer, rows []facts, source, taken string) error {
	fmt.Fprintf(w, "# eniwire instance-type facts, taken %s from %s pkg/vpc/vpc_ip_resource_limit.go by hack/instancetypes.\n", taken, source)
	fmt.Fprintln(w, "# enis: ENIs of the default network card, the primary included; ipv4: IPv4 addresses per ENI, its primary included;")
	fmt.Fprintln(w, "# cards: network cards; hypervisor: nitro, xen, metal (bare metal: none) or unknown; only nitro counts /28 prefixes;")
	fmt.Fprintln(w, "# vcpus: default vCPUs derived from the size in the name (0: unknown; eniwirectl max-pods --from-ec2 reads EC2's).")
	fmt.Fprintln(w, "# type enis ipv4 cards hypervisor vcpus")
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%s %d %d %d %s %d\n", r.name, r.enis, r.ipv4, r.cards, r.hypervisor, r.vcpus); err != nil {
			return err
		}
	}
	return nil
}
