#!/usr/bin/env bash
# The README's demo command: installs the dependencies, builds, and shows what the stack can do today.
# Today that is the RNIC-PI and its loader (rdmactl describes provider modules built in this tree and explains,
# exactly, why a broken one is refused) and the iWARP engine's speed next to memcpy and loopback TCP. The softrnic
# demo (krdmad, it_rping, a perf sweep) replaces this as the kAL, the data path and IT-API land.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${JOBS:-2}"

rdmactl=build/tools/rdmactl/rdmactl
providers=build/tests/rnicpi/providers
step() { printf '\n== %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

step "A kVP written as a C++ class, loaded as the kAL would load it" \
  "$rdmactl" modinfo --provider-dir "$providers" test_cpp_kvp.so
step "A uVP written in plain C, described as JSON" \
  "$rdmactl" --json modinfo --provider-dir "$providers" test_good_uvp.so
echo
echo "== Modules the loader refuses, each with its reason (exit status 1 is expected here)"
"$rdmactl" modinfo --provider-dir "$providers" test_wrong_abi.so test_missing_op.so test_no_entry.so \
  not_a_module.so no_such_provider.so || true

step "The iWARP engine: CRC32c next to memcpy" build/bench/bench_crc32c --seconds 0.3
step "The iWARP engine: MPA framing next to memcpy and a loopback TCP stream" build/bench/bench_framing --seconds 0.3
