package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/test/ec2sim"
)

// noAWS leaves the test without any AWS setting and with EC2 and IMDS unreachable: what a workstation
// without AWS access has.
func noAWS(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "AWS_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:1")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1")
}

func TestMaxPodsAnswersWithoutAWS(t *testing.T) {
	noAWS(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--instance-type", "m5.large"}, "29"},
		{[]string{"--instance-type", "m5.large", "--prefix-delegation"}, "110"},
		{[]string{"--instance-type", "c6i.32xlarge", "--prefix-delegation"}, "250"},
	} {
		if got := maxPods(t, c.args...); got != c.want {
			t.Errorf("max-pods %v = %s, want %s", c.args, got, c.want)
		}
	}
	var out bytes.Buffer
	err := run([]string{"max-pods", "--instance-type", "m5.large", "--from-ec2", "--state-dir", t.TempDir()}, &out)
	if err == nil {
		t.Errorf("--from-ec2 without AWS answered %q", out.String())
	}
}

func TestMaxPodsAsksEC2OnlyForATypeItDoesNotKnowOrWhenTold(t *testing.T) {
	sim := ec2sim.New(ec2sim.DefaultConfig())
	srv := httptest.NewServer(sim.EC2Handler())
	t.Cleanup(srv.Close)
	ec2sim.SetSDKEnv(t, srv.URL, "us-west-2")
	describes := func() int64 { return sim.Counters()["DescribeInstanceTypes"].Calls }

	maxPods(t, "--instance-type", "m5.large")
	if n := describes(); n != 0 {
		t.Errorf("a shipped type made %d DescribeInstanceTypes calls", n)
	}
	if got := maxPods(t, "--instance-type", "m5.large", "--from-ec2"); got != "29" || describes() != 1 {
		t.Errorf("--from-ec2 = %s after %d DescribeInstanceTypes calls, want 29 after 1", got, describes())
	}
	var out bytes.Buffer
	if err := run([]string{"max-pods", "--instance-type", "no.such", "--state-dir", t.TempDir()}, &out); err == nil || describes() != 2 {
		t.Errorf("an unknown type: %v after %d DescribeInstanceTypes calls, want EC2's error after 2", err, describes())
	}
}

// TestMaxPodsAllAgreesWithEniMaxPods compares --all's uncapped secondary-IP column with the numbers of the AWS
// VPC CNI's published eni-max-pods.txt (testdata/eni-max-pods.txt, its source in its header) for every type
// both list.
func TestMaxPodsAllAgreesWithEniMaxPods(t *testing.T) {
	noAWS(t)
	published := readEniMaxPods(t, "testdata/eni-max-pods.txt")
	var out bytes.Buffer
	if err := run([]string{"max-pods", "--all", "--state-dir", t.TempDir()}, &out); err != nil {
		t.Fatalf("max-pods --all: %v", err)
	}
	var header []string
	compared := 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		col := slices.Index(header, "UNCAPPED")
		if col < 0 || len(f) != len(header) {
			t.Fatalf("row %q under header %q", f, header)
		}
		want, ok := published[f[0]]
		if !ok {
			continue
		}
		compared++
		if f[col] != strconv.Itoa(want) {
			t.Errorf("%s: --all says %s, eni-max-pods.txt %d", f[0], f[col], want)
		}
	}
	if compared < len(published)*9/10 {
		t.Errorf("compared %d types of the %d published", compared, len(published))
	}
	t.Logf("%d types compared", compared)

	out.Reset()
	if err := run([]string{"max-pods", "--all", "--output", "json", "--state-dir", t.TempDir()}, &out); err != nil {
		t.Fatal(err)
	}
	var tbl maxPodsTable
	if err := json.Unmarshal(out.Bytes(), &tbl); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	for _, r := range tbl.Types {
		if r.InstanceType == "m5.large" && (r.SecondaryIPs.MaxPods != 29 || r.PrefixDelegation.MaxPods != 110 ||
			r.CustomNetworking.MaxPods != 20 || r.CustomNetworkingPrefixes.MaxPods != 110) {
			t.Errorf("m5.large: %+v", r)
		}
	}
}

func readEniMaxPods(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out[f[0]] = n
	}
	if len(out) == 0 {
		t.Fatalf("%s: no numbers", path)
	}
	return out
}
