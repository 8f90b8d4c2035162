# eniwire. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
export PATH := $(PATH):$(GOBIN):/usr/sbin:/sbin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/eniwire/eniwire/internal/version.Version=$(VERSION)
BIN := bin
FUZZTIME ?= 20s

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install the Debian packages and Go tools that tests and the demo need (root).
	@hack/install-deps.sh

.PHONY: generate
generate: ## Rebuild the BPF objects and their Go bindings with clang (bpf2go).
	$(GO) generate ./bpf/...

.PHONY: build
build: ## Build every binary into bin/ (static, trimmed).
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

.PHONY: lint
lint: ## gofmt and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@# -race: vet compiles every package's dependencies as `go test -race ./...` does, so the tests that follow
	@# in make test find them built (on a fresh machine, most of the root packages' build).
	$(GO) vet -race ./...

.PHONY: test
test: ## Every root package with -race, the IPv4 cluster's cases but five long ones, conformance (kube-proxy iptables) with a NetworkPolicy subset, an IPv6 smoke; a table of step times at the end (root; within CI's 90 min on a fresh machine, aiming at 60 there and 35 warm: docs/testing.md).
	@hack/test.sh test

.PHONY: test-full
test-full: ## What make test ran before it was cut to fit CI (fuzzing, every IPv4 and IPv6 case at full length, the IPv6 NetworkPolicy subset), then make conformance; a table of step times (root; test/README.md).
	@hack/test.sh full

TEST_BIN := $(BIN)/test

.PHONY: test-bin
test-bin: ## Build, once for a test run, what every harness runs: agent, plugin, eniwirectl, ec2sim and pause with the Dockerfile's flags, and in next/ the first three with a second version (ENIWIRE_TEST_BIN).
	@mkdir -p $(TEST_BIN)/next
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(TEST_BIN)/ ./cmd/eniwire-agent ./cmd/eniwire ./cmd/eniwirectl ./cmd/ec2sim ./test/cri/pause
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)-next' -o $(TEST_BIN)/next/ ./cmd/eniwire-agent ./cmd/eniwire ./cmd/eniwirectl

.PHONY: k8s-build
k8s-build: ## Build what the test cluster and conformance need (Kubernetes from source, e2e.test; 13-18 min the first time) into ~/.cache/eniwire-k8s.
	cd $(K8S) && $(K8S_GO) run ./cmd/k8sbuild

K8S := test/k8s
# Every go command of test/k8s runs with the flags the Kubernetes build uses (cluster.Build: CGO off, -trimpath),
# so that go vet, go test and go run there reuse the packages that build compiled instead of compiling
# Kubernetes a second time (on a fresh machine, about as long as the build itself).
# GOFLAGS keeps what `go env` has (the environment's or go's env file, which GOFLAGS would otherwise override).
K8S_GO = CGO_ENABLED=0 GOFLAGS='$(strip $(shell $(GO) env GOFLAGS) -trimpath)' $(GO)
# IP_FAMILY=ipv6 makes `make k8s`, `make e2e-k8s` and `make conformance` run an IPv6 single-stack cluster (dual: dual-stack, k8s and e2e-k8s).
IP_FAMILY ?= ipv4
export IP_FAMILY

.PHONY: e2e-k8s
e2e-k8s: deps ## eniwire on a real Kubernetes cluster (built from source) on the simulated VPC: every case but 11f (make bench-k8s), then a table (root).
	@if [ "$$(id -u)" != 0 ]; then echo "e2e-k8s: needs root; run: sudo make e2e-k8s" >&2; exit 1; fi
	cd $(K8S) && $(K8S_GO) vet ./... && $(K8S_GO) test -count=1 -timeout 75m -v -skip '^TestCustomNetworking$$|TestKubernetesNode/^11f' ./cluster/ ./e2e/

.PHONY: bench-k8s
bench-k8s: deps ## NetworkPolicy latency on the real-node cluster (case 11f, not part of e2e-k8s: about 5 minutes): policy change to enforced on both nodes, new allowed pod to reached from both, p50/p99/max (root).
	@if [ "$$(id -u)" != 0 ]; then echo "bench-k8s: needs root; run: sudo make bench-k8s" >&2; exit 1; fi
	cd $(K8S) && $(K8S_GO) test -count=1 -timeout 30m -v -run 'TestKubernetesNode/^(1\.|11f)' ./e2e/

CONFORMANCE_FLAGS ?= -extended -netpol all

.PHONY: conformance
conformance: deps ## Kubernetes' network conformance tests (e2e.test, v1.34.2) and its NetworkPolicy specs against eniwire in kube-proxy iptables and nftables mode, then a table (root).
	@if [ "$$(id -u)" != 0 ]; then echo "conformance: needs root; run: sudo make conformance" >&2; exit 1; fi
	cd $(K8S) && $(K8S_GO) run ./cmd/conformance -ip-family $(IP_FAMILY) $(CONFORMANCE_FLAGS)

.PHONY: conformance-subset
conformance-subset: deps ## Every [sig-network] [Conformance] spec and 4 NetworkPolicy specs, kube-proxy iptables mode only, in the IP_FAMILY cluster: make test's IPv4 conformance step, make test-full's IPv6 one (root).
	@if [ "$$(id -u)" != 0 ]; then echo "conformance-subset: needs root; run: sudo make conformance-subset" >&2; exit 1; fi
	cd $(K8S) && $(K8S_GO) run ./cmd/conformance -ip-family $(IP_FAMILY) -proxy-modes iptables -netpol subset

.PHONY: k8s
k8s: deps ## Bring up the Kubernetes cluster with eniwire on the simulated VPC and leave it running until Ctrl-C (root).
	@if [ "$$(id -u)" != 0 ]; then echo "k8s: needs root; run: sudo make k8s" >&2; exit 1; fi
	cd $(K8S) && $(K8S_GO) run ./cmd/k8snode -ip-family $(IP_FAMILY)

.PHONY: k8s-clean
k8s-clean: ## Remove what a killed `make k8s` or `make e2e-k8s` left (processes, namespaces, cgroups, scratch dirs).
	cd $(K8S) && $(K8S_GO) run ./cmd/k8snode -clean

.PHONY: check-generate
check-generate: ## Regenerate the BPF objects and fail if they differ from the committed ones.
	$(GO) generate ./bpf/...
	@git diff --exit-code --stat -- bpf/ || { echo "bpf/: generated files differ from the sources; run make generate and commit" >&2; exit 1; }

.PHONY: verify
verify: ## go mod tidy, generate and gofmt, then fail if the tree changed.
	$(GO) mod tidy
	$(MAKE) generate
	gofmt -w $$(git ls-files '*.go')
	git diff --exit-code

.PHONY: bench
bench: deps ## Run the benchmarks and print their figures, each group with its method.
	@echo "== EC2 calls per new ENI and per IP, and warm-up of an m5.4xlarge (WARM_ENI_TARGET=8) under the simulator's"
	@echo "   default throttling: virtual seconds against the least the AWS buckets allow (controller on a 100x clock)"
	$(GO) test -run '^$$' -bench 'WarmUp|CallsPerENI' -benchtime 1x ./controller/
	@echo "== assign and release through the agent's unix socket with a warm pool, 2000 of each, p50/p99 per journal"
	@echo "   sync policy; BenchmarkFsync is this disk's own write+fdatasync of 200 bytes, the floor of sync=always"
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./controller/agent/
	@echo "== journal: bytes and latency per save at 10 and 500 assignments (deltas), fsyncs per save with 8 writers"
	$(GO) test -run '^$$' -bench . -benchtime 500x ./controller/journal/
	@echo "== the EC2 wrapper's own cost per call (limiter, metrics) against calling the SDK interface directly"
	$(GO) test -run '^$$' -bench . ./controller/ec2client/
	@echo "== CNI ADD and DEL through libcni with the built plugin, 200 pods, warm pool: p50/p99 and the plugin's peak RSS"
	$(GO) test -run '^$$' -bench AddDelThroughLibcni -benchtime 1x ./test/cnitest/
	@echo "== the same 200 pods through libcni, same run: Debian's ptp + host-local against eniwire (real agent, warm"
	@echo "   pool) and a Go plugin that does nothing (the floor: exec, Go start-up and exit, libcni), with CPU per ADD;"
	@echo "   fails when eniwire's ADD p99 is over 0.5 x the reference's (make goes on to the next group)"
	-$(GO) test -run '^$$' -bench AddDelVersusReference -benchtime 1x ./test/cnitest/
	@echo "== the NetworkPolicy compiler holding 20,000 pods, 2,000 namespaces and 1,000 policies: bytes held, CPU of"
	@echo "   the build and per pod add/delete, against a full Compile of the node (the least of 3) in the same run"
	$(GO) test -run '^$$' -bench . ./netpol/
	@echo "== the agent's NetworkPolicy watch at the same scale, as the agent runs it (client-go informers fed in-process,"
	@echo "   the compiler, the policy maps loaded and written for real): heap after sync, CPU of the sync and per pod"
	@echo "   add, label change and delete, with the writes and peers written per event, against the compiler alone"
	$(GO) test -run '^$$' -bench WatcherAtScale -benchtime 1x ./controller/policywatch/
	@echo "== from_pod per packet (BPF_PROG_TEST_RUN) with 1 to 10,000 pods in the map, and with 0, 100 and 10,000"
	@echo "   policy rules selecting the receiver (established and new flows, ratios to 0 rules in the same run)"
	$(GO) test -run '^$$' -bench . ./datapath/
	@echo "== pod -> VPC host through eniwire, the AWS VPC CNI's ip rules and a plain routed veth; then NetworkPolicy:"
	@echo "   eniwire's and kube-network-policies' (its own module, test/dpbench/knp) against none (method printed below)"
	@mkdir -p $(BIN)
	cd test/dpbench/knp && $(GO) build -o $(CURDIR)/$(BIN)/knp .
	DPBENCH_KNP=$(CURDIR)/$(BIN)/knp $(GO) test -count=1 -run '^TestEachEnforcerOfThePolicyRows' ./test/dpbench/
	$(GO) run ./test/dpbench/cmd/dpbench -knp $(BIN)/knp

.PHONY: fleet
fleet: ## Replay the rollout that broke the AWS VPC CNI on a simulated fleet (NODES=300), then the prefix-mode scenarios (fleet-prefix) and the exhausted node subnets (fleet-exhausted).
	$(GO) run ./test/fleet/cmd/fleet -nodes $(or $(NODES),300)
	$(MAKE) fleet-prefix
	$(MAKE) fleet-exhausted

.PHONY: fleet-exhausted
fleet-exhausted: ## The node subnets run out a quarter into a pod rollout; subnet discovery carries on in tagged pod subnets (NODES=100; at 300 the account's create bucket leaves pods waiting when the window ends: docs/networking.md).
	$(GO) run ./test/fleet/cmd/fleet -nodes $(or $(NODES),100) -scenarios exhausted

.PHONY: fleet-prefix
fleet-prefix: ## Prefix mode on a simulated fleet: rollout-prefix and a fragmented subnet, eniwire vs the AWS VPC CNI (NODES=1000, MINIMUM_IP_TARGET=).
	$(GO) run ./test/fleet/cmd/fleet -nodes $(or $(NODES),1000) -scenarios rollout-prefix,fragmented \
		-minimum-ip-target $(or $(MINIMUM_IP_TARGET),0)

.PHONY: demo
demo: deps build ## Run eniwire on a simulated VPC in network namespaces (root; DEMO_KEEP=1 stays up).
	@if [ "$$(id -u)" != 0 ]; then echo "demo: needs root (network namespaces, BPF, bpffs); run: sudo make demo" >&2; exit 1; fi
	$(GO) run ./test/demo -bin $(BIN)

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
