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
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

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
	$(GO) vet ./...

.PHONY: test
test: deps lint check-generate ## Install what is missing, vet, check the BPF objects, run every test with -race, fuzz briefly.
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) ./test/ec2sim

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
bench: deps ## Run the benchmarks and print their figures (controller, journal, EC2 wrapper, CNI, datapath).
	$(GO) test -run '^$$' -bench . -benchtime 1x ./controller/ ./controller/agent/ ./controller/journal/
	$(GO) test -run '^$$' -bench . ./controller/ec2client/
	$(GO) test -run '^$$' -bench AddDel -benchtime 1x ./test/cnitest/
	$(GO) test -run '^$$' -bench . ./datapath/
	$(GO) run ./test/dpbench/cmd/dpbench

.PHONY: fleet
fleet: ## Replay the rollout that broke the AWS VPC CNI on a simulated fleet (NODES=300).
	$(GO) run ./test/fleet/cmd/fleet -nodes $(or $(NODES),300)

.PHONY: demo
demo: deps build ## Run eniwire on a simulated VPC in network namespaces (root; DEMO_KEEP=1 stays up).
	@if [ "$$(id -u)" != 0 ]; then echo "demo: needs root (network namespaces, BPF, bpffs); run: sudo make demo" >&2; exit 1; fi
	$(GO) run ./test/demo -bin $(BIN)

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
