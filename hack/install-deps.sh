#!/usr/bin/env bash
# Installs what building and testing eniwire needs on a Debian machine, and nothing when it is all there.
# Run as root (make test and make demo call it). Idempotent.
set -euo pipefail

debs=(clang llvm libbpf-dev bpftool iproute2 iperf3 awscli containernetworking-plugins containerd runc nftables iptables procps conntrack busybox-static bind9-dnsutils curl wget netcat-openbsd prometheus)
declare -A probe=(
	[clang]=/usr/bin/clang [llvm]=/usr/bin/llvm-strip [libbpf-dev]=/usr/include/bpf/bpf_helpers.h
	[bpftool]=/usr/sbin/bpftool [iproute2]=/usr/sbin/ip [iperf3]=/usr/bin/iperf3 [awscli]=/usr/bin/aws
	[containernetworking-plugins]=/usr/lib/cni/portmap [containerd]=/usr/bin/containerd [runc]=/usr/sbin/runc
	[nftables]=/usr/sbin/nft [iptables]=/usr/sbin/iptables [procps]=/usr/bin/pgrep [conntrack]=/usr/sbin/conntrack
	[busybox-static]=/usr/bin/busybox [bind9-dnsutils]=/usr/bin/dig [curl]=/usr/bin/curl [wget]=/usr/bin/wget [netcat-openbsd]=/usr/bin/nc.openbsd
	[prometheus]=/usr/bin/promtool
)
missing=()
for p in "${debs[@]}"; do
	[ -e "${probe[$p]}" ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "install-deps: missing Debian packages (${missing[*]}); run as root to install them" >&2
		exit 1
	fi
	echo "install-deps: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	if [[ " ${missing[*]} " == *" prometheus "* ]]; then
		# Tests run prometheus and promtool as programs of their own; the package's service would hold port 9090
		# and scrape nothing, so it is stopped and kept from starting at boot.
		if [ -d /run/systemd/system ]; then
			systemctl disable --now prometheus.service >/dev/null 2>&1 || true
		else
			invoke-rc.d prometheus stop >/dev/null 2>&1 || true
			update-rc.d prometheus disable >/dev/null 2>&1 || true
		fi
	fi
fi

gobin="$(go env GOPATH)/bin"
declare -A gotools=(
	[cnitool]=github.com/containernetworking/cni/cnitool@v1.3.0
	[crictl]=sigs.k8s.io/cri-tools/cmd/crictl@v1.34.0
)
for t in "${!gotools[@]}"; do
	if ! command -v "$t" >/dev/null && [ ! -x "$gobin/$t" ]; then
		echo "install-deps: go install ${gotools[$t]}"
		GOFLAGS= go install "${gotools[$t]}"
	fi
done

# bpffs: pinned maps and links live there.
if [ "$(id -u)" = 0 ] && ! mountpoint -q /sys/fs/bpf; then
	mount -t bpf bpf /sys/fs/bpf
fi
