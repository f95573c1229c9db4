#!/usr/bin/env bash
# The README's demo command: installs the dependencies, builds, and shows what the stack can do today:
# - a consumer on the embedded default (the kAL in its own process) opening the softrnic RNIC on 127.0.0.1 through
#   the access layer and creating one object of every kind;
# - the same through a real krdmad on a private device path, seen by the administrator with rdmactl, including the
#   kAL reclaiming everything of a consumer killed with kill -9;
# - it_rping (IT-API) between two processes, each hosting the embedded default, and it_perf's headline figures and
#   a short sweep against raw TCP measured in the same run (with a plot);
# - uDAPL: Debian's unmodified dtest and dapltest over the provider in the DAT registry (a private dat.conf);
# - kernel consumers: krdmad loading kernel_echo (C, kernel IT-API) and blk_service (C, kDAPL: an RDMA block
#   service that the uDAPL client dapl_blk writes, reads back and verifies), seen with rdmactl;
# - the RNIC-PI loader explaining modules, and the iWARP engine's speed next to memcpy and loopback TCP;
# and ends with a summary of what ran and passed (any failure stops the demo before it).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${JOBS:-2}"

rdmactl=build/tools/rdmactl/rdmactl
tour=build/tools/examples/rnic_tour
providers=build/tests/rnicpi/providers
step() { printf '\n== %s\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }
# What ran and passed, for the summary the demo ends on (set -e stops it at the first failure, so only what
# passed gets here).
did=()
passed() { did+=("$1"); }

# Everything this demo starts goes away with it, whatever happens.
work=$(mktemp -d /tmp/openrdma-demo-XXXXXX)
pids=()
cleanup() {
  # The shell reports each job killed here ("Killed"): not news after the summary.
  exec 2>/dev/null
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/embedded.json" <<JSON
{"provider_dir": "$PWD/build/providers", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]}
JSON
sed 's|^{|{"device": "'"$work"'/krdma.sock", |' "$work/embedded.json" >"$work/krdmad.json"

step "A consumer on the embedded default: the kAL in its own process, softrnic on 127.0.0.1" \
  env OPENRDMA_EMBEDDED_CONFIG="$work/embedded.json" "$tour" 127.0.0.1
passed "rnic_tour: softrnic opened by address through a kAL in its own process, one object of every kind"

# IT-API on the embedded default: every process below hosts its own kAL with softrnic on 127.0.0.1.
export OPENRDMA_EMBEDDED_CONFIG="$work/embedded.json"
echo
echo "== it_rping: the rping exchange over IT-API between two processes (server: RDMA Read of the client's buffer,"
echo "   RDMA Write back; both verify)"
build/tools/it_rping/it_rping -s -d -a 127.0.0.1 -p 7174 -S 100 >"$work/rping-server.out" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "listening on port" "$work/rping-server.out" 2>/dev/null && break; sleep 0.05; done
echo "\$ it_rping -c -a 127.0.0.1 -p 7174 -C 10 -S 100 -V -v"
build/tools/it_rping/it_rping -c -a 127.0.0.1 -p 7174 -C 10 -S 100 -V -v
passed "it_rping: 10 rping iterations over IT-API between two processes, RDMA Read and Write verified at both ends"
step "it_perf: RDMA Write bandwidth (64 KiB, 1 MiB) and 8 B latency next to raw TCP, best of 5 alternating rounds" \
  build/tools/it_perf/it_perf --loopback
step "it_perf: a short sweep of RDMA Write, 64 B to 1 MiB (plot: $work/it_perf.png)" \
  build/tools/it_perf/it_perf --loopback -t write --bw --lat --sweep --min 64 --max 1M -D 0.05 --plot "$work/it_perf.png"
cp "$work/it_perf.png" build/it_perf.png 2>/dev/null && echo "(plot kept as build/it_perf.png)"
passed "it_perf: RDMA Write bandwidth and latency over IT-API beside raw TCP in the same run, and a sweep"
unset OPENRDMA_EMBEDDED_CONFIG

echo
echo "== krdmad on a private device path, and what the administrator sees"
build/kal/krdmad --config "$work/krdmad.json" --log-level warn &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/krdma.sock" ] && break; sleep 0.05; done
export KRDMA_DEVICE="$work/krdma.sock"
step "Attached RNICs" "$rdmactl" list
step "Loaded kVP modules" "$rdmactl" modules
passed "krdmad served a private device path; rdmactl listed its RNICs and modules"

echo
echo "== uDAPL: Debian's unmodified dtest and dapltest over OpenRDMA, through the distribution's DAT registry"
step "The dat.conf entries of krdmad's RNICs (kept in a private registry, DAT_OVERRIDE)" \
  "$rdmactl" dat-conf --library "$PWD/build/api/dapl/libdaplopenrdma.so.2"
"$rdmactl" dat-conf --library "$PWD/build/api/dapl/libdaplopenrdma.so.2" >"$work/dat.conf"
export DAT_OVERRIDE="$work/dat.conf"
dtest -s -P openrdma-sr0 >"$work/dtest-server.out" 2>&1 &
pids+=($!)
sleep 0.5
echo "\$ dtest -h 127.0.0.1 -P openrdma-sr0      (server: dtest -s -P openrdma-sr0)"
dtest -h 127.0.0.1 -P openrdma-sr0 2>&1 | grep -E 'CONNECTED|RDMA (WRITE|READ) DATA|PingPong|RDMA write|Test Complete'
dapltest -T S -D openrdma-sr0 >"$work/dapltest-server.out" 2>&1 &
pids+=($!)
sleep 0.5
step "dapltest: 2 threads x 2 endpoints, Send/Recv, RDMA Write and Read, every byte validated" \
  dapltest -T T -s 127.0.0.1 -D openrdma-sr0 -i 200 -t 2 -w 2 -V client SR 4096 server SR 4096 client RW 8192 client RR 8192
passed "uDAPL: Debian's unmodified dtest and dapltest (Send/Recv, RDMA Write and Read, validated) through the DAT registry"
unset DAT_OVERRIDE
"$tour" --hold 127.0.0.1 >"$work/tour.out" &
tour_pid=$!
pids+=("$tour_pid")
for _ in $(seq 100); do grep -q holding "$work/tour.out" 2>/dev/null && break; sleep 0.05; done
cat "$work/tour.out"
step "What the consumer holds, per process and per RNIC" "$rdmactl" resources
kill -9 "$tour_pid"
wait "$tour_pid" 2>/dev/null || true
sleep 0.2
step "After kill -9 of the consumer: krdmad reclaimed every object and every pinned page" "$rdmactl" resources
passed "kill -9 of a consumer: krdmad reclaimed every object and pinned page it held"
unset KRDMA_DEVICE

echo
echo "== Kernel consumers: krdmad loads kernel_echo (C, kernel IT-API) and blk_service (C, kDAPL)"
sed 's|^{|{"consumers": [{"module": "'"$PWD"'/build/tools/examples/kernel_echo.so", "args": {"rnic": "sr0", "port": 7471}}, {"module": "'"$PWD"'/build/tools/dapl_blk/blk_service.so", "args": {"rnic": "sr0", "port": 7480, "size_mb": 32}}], |' \
  "$work/krdmad.json" | sed 's|krdma.sock|krdma2.sock|' >"$work/krdmad-echo.json"
build/kal/krdmad --config "$work/krdmad-echo.json" --log-level warn &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/krdma2.sock" ] && break; sleep 0.05; done
export KRDMA_DEVICE="$work/krdma2.sock"
step "Consumer modules krdmad runs" "$rdmactl" consumers
step "What the kernel consumers hold: objects of krdmad's own pid (IAs, PZs, CQs, LMRs, listen points)" \
  "$rdmactl" resources
"$rdmactl" dat-conf --library "$PWD/build/api/dapl/libdaplopenrdma.so.2" >"$work/dat2.conf"
step "kDAPL: the blk_service module serves a RAM volume; dapl_blk (uDAPL) writes 16 MiB, reads it back, verifies" \
  env DAT_OVERRIDE="$work/dat2.conf" build/tools/dapl_blk/dapl_blk -P openrdma-sr0 -b 65536 -n 256
passed "kernel consumers: krdmad ran kernel_echo (kernel IT-API) and blk_service (kDAPL); dapl_blk wrote, read back and verified 16 MiB"
unset KRDMA_DEVICE

step "A kVP written as a C++ class, loaded as the kAL would load it" \
  "$rdmactl" modinfo --provider-dir "$providers" test_cpp_kvp.so
step "A uVP written in plain C, described as JSON" \
  "$rdmactl" --json modinfo --provider-dir "$providers" test_good_uvp.so
echo
echo "== Modules the loader refuses, each with its reason (exit status 1 is expected here)"
"$rdmactl" modinfo --provider-dir "$providers" test_wrong_abi.so test_missing_op.so test_no_entry.so \
  not_a_module.so no_such_provider.so || true
passed "RNIC-PI loader: a C++ kVP and a C uVP described, five bad modules refused, each with its reason"

step "The iWARP engine: CRC32c next to memcpy" build/bench/bench_crc32c --seconds 0.3
step "The iWARP engine: MPA framing next to memcpy and a loopback TCP stream" build/bench/bench_framing --seconds 0.3
passed "iWARP engine: CRC32c and MPA framing measured beside memcpy and loopback TCP (docs/performance.md has today's figures)"

echo
echo "== What the stack did"
for line in "${did[@]}"; do printf '  ok  %s\n' "$line"; done
