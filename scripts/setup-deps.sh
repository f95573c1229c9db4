#!/usr/bin/env bash
# Installs every build, test and documentation dependency of the project from Debian 12 packages.
# Nothing is downloaded from anywhere else and nothing is vendored. Safe to run repeatedly.
set -euo pipefail

packages=(
  # toolchain
  build-essential g++ cmake ninja-build pkg-config git
  # libraries the code links or includes
  libboost-dev libboost-filesystem-dev      # Boost.DLL (header-only, with std::filesystem)
  nlohmann-json3-dev                        # configuration and --json output
  libcli11-dev                              # command lines of krdmad and the tools
  libnl-3-dev libnl-route-3-dev             # route and neighbour look-ups
  libsystemd-dev                            # sd_notify: krdmad as a Type=notify service
  linux-libc-dev                            # UAPI headers (<linux/ioctl.h>, <linux/tcp.h>, <linux/bpf.h>)
  clang libbpf-dev                          # the sockets layer's peer detection: a sockops program krdmad loads
  libdapl-dev libdapl2 dapl2-utils          # DAT 2.0 headers, registry (libdat2) and dapltest
  # tests, benchmarks, documentation
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  doxygen graphviz
  scdoc man-db                              # manual pages: scdoc builds them, man -l renders them in the tests
  gnuplot-nox                               # it_perf --plot (bandwidth and latency against message size)
  # the sockets layer's tests and figures: unmodified Debian programs over openrdma-run
  iperf3 sockperf socat netcat-openbsd python3   # python3 reads their JSON (iperf3 -J, rdmactl --json)
  # test hosts (network namespaces, veth) and process helpers
  iproute2 procps util-linux
  systemd                                   # systemd-analyze verify of the installed krdmad.service
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
