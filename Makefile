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
test: deps lint ## Install what is missing, then vet, run every test with -race, and fuzz the decoders briefly.
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) ./test/ec2sim

.PHONY: verify
verify: ## go mod tidy, generate and gofmt, then fail if the tree changed.
	$(GO) mod tidy
	$(MAKE) generate
	gofmt -w $$(git ls-files '*.go')
	git diff --exit-code

.PHONY: bench
bench: deps ## Run the benchmarks and print their figures.
	@echo "bench: not built yet" >&2; exit 1

.PHONY: demo
demo: deps build ## Run eniwire on a simulated VPC in network namespaces (root).
	@echo "demo: not built yet" >&2; exit 1

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
