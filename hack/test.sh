#!/usr/bin/env bash
# Runs `make test` (hack/test.sh) or `make test-full` (hack/test.sh full) as named steps, one progress line
# each, and ends, pass or fail, with every step's wall time: the table a CI log shows where the time went.
#
# make test: the root packages, the IPv4 cluster's cases, conformance in kube-proxy iptables mode with a
# NetworkPolicy subset, and a smoke of IPv6. make test-full: what make test ran before it was cut to fit CI
# (20 s of fuzzing, every IPv4 and IPv6 case at its full length, the NetworkPolicy subset in an IPv6 cluster), then
# `make conformance` (both kube-proxy modes, the extended specs, the whole NetworkPolicy suite).
# test/README.md says what moved and why.
set -uo pipefail
cd "$(dirname "$0")/.."

mode=${1:-test}
case $mode in test | full) ;; *) echo "usage: hack/test.sh [test|full]" >&2; exit 2 ;; esac

GO=${GO:-go}
MAKE=${MAKE:-make}
logs=${TEST_LOGS:-$PWD/bin/test-logs}
mkdir -p "$logs"
# Every harness takes eniwire's binaries from here instead of building its own (internal/testenv).
export ENIWIRE_TEST_BIN=$PWD/bin/test

names=() times=() results=()
run_start=$SECONDS
failed=""

table() {
	local total=$((SECONDS - run_start))
	printf '\n== %s: step times (wall clock)\n' "make ${mode/full/test-full}"
	printf '| %-58s | %-6s | %8s |\n' step result seconds
	printf '| %-58s | %-6s | %8s |\n' --- --- ---
	for i in "${!names[@]}"; do
		printf '| %-58s | %-6s | %8s |\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
	done
	printf '| %-58s | %-6s | %8s |\n' "total" "$( [ -n "$failed" ] && echo FAIL || echo pass)" "$total"
	printf '(%d min %d s)\n' $((total / 60)) $((total % 60))
	[ -z "$failed" ] || printf 'failed: %s\n' "$failed"
}

# step NAME COMMAND...: runs one step unless an earlier one failed, and records its time and result.
step() {
	local name=$1
	shift
	[ -z "$failed" ] || return 0
	printf '\n== %s: %s (%s)\n' "make ${mode/full/test-full}" "$name" "$(date -u +%H:%M:%S)"
	local start=$SECONDS rc=0
	"$@" || rc=$?
	names+=("$name") times+=($((SECONDS - start)))
	if [ $rc -eq 0 ]; then results+=(pass); else results+=(FAIL) failed=$name; fi
}

# The Kubernetes build, then go vet of test/k8s (which compiles the Kubernetes client packages the cluster's
# tests need), run niced beside the root packages' tests, on the CPU their waits leave idle; the clusters'
# steps then find both done. Their own times are in the log; the table shows the wait that remained.
k8s_build_pid=""
# Every go command of test/k8s runs with the Kubernetes build's flags (cluster.Build: CGO off, -trimpath), as
# the Makefile's K8S_GO does: go vet, go test and go run there then reuse the packages the build compiled
# instead of compiling Kubernetes a second time.
# Called in the subshell that cds to test/k8s.
# GOFLAGS keeps what `go env` has (the environment's or go's env file, which GOFLAGS would otherwise override).
k8s_go_env() {
	local flags
	flags=$("$GO" env GOFLAGS) || return
	export CGO_ENABLED=0 GOFLAGS="${flags:+$flags }-trimpath"
}
start_k8s_build() {
	# Its own session, so that stopping it stops every process of it.
	(cd test/k8s && k8s_go_env && exec setsid nice -n 19 bash -c '"$0" run ./cmd/k8sbuild && echo "== go vet ./... (test/k8s)" && exec "$0" vet ./...' "$GO") >"$logs/k8s-build.log" 2>&1 &
	k8s_build_pid=$!
	echo "Kubernetes build started beside the tests (pid $k8s_build_pid, log $logs/k8s-build.log)"
}
wait_k8s_build() {
	local rc=0
	wait "$k8s_build_pid" || rc=$?
	k8s_build_pid=""
	tail -n 12 "$logs/k8s-build.log"
	return $rc
}
stop_k8s_build() { [ -z "$k8s_build_pid" ] || kill -- -"$k8s_build_pid" 2>/dev/null; }
trap 'stop_k8s_build; table' EXIT

k8s_tests() { # k8s_tests FAMILY [go test args...]
	local family=$1
	shift
	(cd test/k8s && k8s_go_env && IP_FAMILY=$family "$GO" test -count=1 -timeout 75m -v "$@" ./cluster/ ./e2e/)
}
conformance() { # conformance FAMILY [cmd/conformance args...]
	local family=$1
	shift
	(cd test/k8s && k8s_go_env && "$GO" run ./cmd/conformance -ip-family "$family" -out "$logs/conformance-$family" "$@")
}
root_packages() { "$GO" test -race -count=1 -timeout 30m ./...; }
fuzz() { "$GO" test -run '^$' -fuzz '^FuzzDecodeRequest$' -fuzztime "${FUZZTIME:-20s}" ./test/ec2sim; }
k8s_ipv4_short() {
	export E2E_PROBE_MINUTES=1 E2E_FULL_NODE_MINUTES=2
	k8s_tests ipv4 -skip "$notk8s_short"
}

if [ "$(id -u)" != 0 ]; then
	echo "make test needs root (network namespaces, BPF, a Kubernetes node); run: sudo make test" >&2
	exit 1
fi

step "deps (Debian packages, Go tools)" "$MAKE" --no-print-directory deps
step "lint (gofmt, go vet)" "$MAKE" --no-print-directory lint
step "check-generate (BPF objects)" "$MAKE" --no-print-directory check-generate
step "test-bin (agent, plugin, eniwirectl, ec2sim, pause)" "$MAKE" --no-print-directory test-bin
if [ "$mode" = full ]; then
	# dpbench's policy rows check kube-network-policies too when it is built (make test leaves it to make bench).
	export DPBENCH_KNP=$PWD/bin/knp
	step "kube-network-policies for dpbench's policy rows" bash -c 'cd test/dpbench/knp && exec "$0" build -o "$1" .' "$GO" "$DPBENCH_KNP"
fi
[ -n "$failed" ] || start_k8s_build
step "root packages (go test -race ./...)" root_packages
# Fuzzing builds the simulator and the EC2 SDK once more, instrumented (about 6 minutes on a fresh machine for
# 20 s of fuzzing); make test runs the fuzz target's seeds with the root packages and leaves fuzzing to test-full.
[ "$mode" = test ] || step "fuzz (FuzzDecodeRequest ${FUZZTIME:-20s})" fuzz
step "Kubernetes build, vet of test/k8s (what remained)" wait_k8s_build

# The case that measures policy latency (11f) is `make bench-k8s`'s; custom networking runs as a case of
# TestKubernetesNode, not its own test.
notk8s='^TestCustomNetworking$|TestKubernetesNode/^11f'
# make test leaves five long cases of the IPv4 cluster to make test-full (test/README.md says why): 1c (the
# subnet exhausted), 4e (a vanished netns), 5b (the agent deleted during a scale-up), 8 (110 pods with
# prefixes on an m5.large) and 10b (100 pods onto an empty pool of secondary IPs).
notk8s_short='^TestCustomNetworking$|TestKubernetesNode/^(11f|1c|4e|5b|8|10b)\.'
if [ "$mode" = test ]; then
	# The IPv4 cases but five long ones, the timed watches shortened: the probed port watched 1 minute (5 in
	# test-full), the full node held 2 minutes (10; cases 3 to 4f run while it is held).
	step "IPv4 cluster: the cases but 1c, 4e, 5b, 8, 10b (e2e-k8s)" k8s_ipv4_short
	step "IPv4 conformance, kube-proxy iptables: Conformance + NetworkPolicy subset" conformance ipv4 -proxy-modes iptables -netpol subset
	# The IPv6 smoke: a pod's address of the node's /80 (v6-2), a ClusterIP Service (v6-3), the internet
	# over IPv6 and IPv4 through the node (v6-4b); then one of Kubernetes' NetworkPolicy specs.
	step "IPv6 cluster: smoke (v6-2, a Service, v6-4b)" k8s_tests ipv6 -skip "$notk8s" \
		-run 'TestKubernetesNode/^(1\.|v6-2\.|v6-3\._\[iptables\]_ClusterIP_TCP_and_UDP,_backend_on_the_other_node$|v6-4b\.)'
	# One spec takes a minute or two; a ginkgo limit of 20 minutes keeps a hang from taking the rest of CI's time.
	step "IPv6 conformance: one NetworkPolicy spec" conformance ipv6 -proxy-modes iptables -timeout 20m \
		-focus "\[sig-network\] Netpol .*should support a 'default-deny-ingress' policy \[Feature:NetworkPolicy\]"
else
	step "IPv4 cluster: every case, full length (e2e-k8s)" k8s_tests ipv4 -skip "$notk8s"
	step "IPv6 cluster: every case, full length (e2e-k8s)" k8s_tests ipv6 -skip "$notk8s"
	step "IPv6 conformance, kube-proxy iptables: Conformance + NetworkPolicy subset" conformance ipv6 -proxy-modes iptables -netpol subset
	step "conformance: iptables and nftables, extended, whole NetworkPolicy suite" conformance ipv4 -extended -netpol all
fi
[ -z "$failed" ]
