# eniwire's node image: the agent, the CNI plugin it installs on the host, and the operator CLI.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t eniwire:dev .
#
# The builder is pinned by its full Go version, the one go.mod asks for (a test keeps the two equal). The
# release pipeline resolves the tag once and appends its @sha256 digest; none is written here, since a digest
# can only come from the registry.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Static binaries: the final image has no libc. GOTOOLCHAIN=local: never download another toolchain.
ENV CGO_ENABLED=0 GOOS=linux GOTOOLCHAIN=local
# Modules first, in their own layer, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The BPF objects are committed (bpf/*_bpfel.o) and embedded, so the builder needs no clang.
RUN go build -trimpath -ldflags "-s -w -X github.com/eniwire/eniwire/internal/version.Version=${VERSION}" \
      -o /out/ ./cmd/eniwire-agent ./cmd/eniwire ./cmd/eniwirectl

# distroless static: no shell, no package manager; it carries CA certificates (for the EC2 endpoint over TLS),
# tzdata and /etc/passwd. Not the :nonroot variant: the agent runs as root with a few capabilities (see
# deploy/manifests/daemonset.yaml) to load BPF programs and write the host's CNI directories.
FROM gcr.io/distroless/static-debian12:latest
COPY --from=build /out/eniwire-agent /out/eniwire /out/eniwirectl /usr/local/bin/
# The default network configuration; the DaemonSet mounts its ConfigMap over this directory.
COPY deploy/10-eniwire.conflist /etc/eniwire/cni/10-eniwire.conflist
USER 0:0
ENTRYPOINT ["/usr/local/bin/eniwire-agent"]
