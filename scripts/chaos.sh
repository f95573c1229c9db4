#!/usr/bin/env bash
# Chaos: kill -9 consumers of a real krdmad at random points of connection setup, transfer and teardown, and check
# after each kill that krdmad reclaimed everything (no process, no object, no pinned byte in rdmactl --json), within
# a deadline, and that its descriptors and memory stay flat over the run.
#   bash scripts/chaos.sh [ITERATIONS] [BUILD_DIR]      (default 100 iterations, build directory ./build)
# Each iteration runs an it_rping server and client (Send, RDMA Read and Write, verified) through one krdmad on a
# private device path, waits a random time chosen for the phase (setup: 0-30 ms, transfer: 50-400 ms, teardown:
# around the end of a short run), kills the client, the server or both with SIGKILL, then kills what is left.
# Exit 0 when every iteration was reclaimed; prints one line per iteration and a summary. Everything it starts is
# in its own process group and killed on exit, whatever happens.
set -uo pipefail
iterations=${1:-100}
build=${2:-$(cd "$(dirname "$0")/.." && pwd)/build}
source "$(dirname "$0")/private-krdmad.sh"
private_krdmad chaos.sh "$build"

fds() { ls "/proc/$kpid/fd" | wc -l; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$kpid/status"; }
# "processes": [] in resources and 0 pinned bytes in limits: everything reclaimed.
reclaimed() {
  "$rdmactl" --device "$device" --json resources 2>/dev/null | grep -q '"processes": \[\]' || return 1
  local pinned
  pinned=$("$rdmactl" --device "$device" --json limits 2>/dev/null | grep -o '"in_use": [0-9]*' | sed -n 2p)
  [[ $pinned == '"in_use": 0' ]]
}
# A random integer in [lo, hi].
rnd() { echo $(( $1 + RANDOM % ($2 - $1 + 1) )); }

failures=0
worst_ms=0
start_fds=""
start_rss=""
port_base=$(( 20000 + RANDOM % 20000 ))
# One whole exchange first: what krdmad makes once, on the first connection it serves (the TCP peer detection's
# program and map), exists before the baseline below. Without it, a run whose first iterations all kill their
# programs before they reach krdmad (slow to start under a sanitizer) counted that one-time load as growth.
setsid "$rping" -s -a 127.0.0.1 -p "$port_base" -C 1 > "$dir/warmup-server.out" 2>&1 &
wpid=$!
groups+=("$wpid")
port_listens "$port_base" || { echo "chaos.sh: the warm-up server never listened"; exit 1; }
timeout 30 "$rping" -c -a 127.0.0.1 -p "$port_base" -C 1 > "$dir/warmup-client.out" 2>&1 ||
  { echo "chaos.sh: the warm-up exchange failed"; cat "$dir/warmup-client.out"; exit 1; }
{ wait "$wpid"; } 2>/dev/null
for i in $(seq 1 "$iterations"); do
  port=$(( port_base + i % 5000 ))
  phases=(setup transfer teardown)
  phase=${phases[$(rnd 0 2)]}
  victims=(client server both)
  victim=${victims[$(rnd 0 2)]}
  count=0
  [[ $phase == teardown ]] && count=$(rnd 5 40)
  setsid "$rping" -s -a 127.0.0.1 -p "$port" -S 65535 -C "$count" > "$dir/server.out" 2>&1 &
  spid=$!
  groups+=("$spid")
  sleep 0.05
  setsid "$rping" -c -a 127.0.0.1 -p "$port" -S 65535 -C "$count" -V > "$dir/client.out" 2>&1 &
  cpid=$!
  groups+=("$cpid")
  case $phase in
    setup) wait_ms=$(rnd 0 30) ;;
    transfer) wait_ms=$(rnd 50 400) ;;
    teardown) wait_ms=$(rnd 0 150) ;;
  esac
  sleep "$(printf '0.%03d' "$wait_ms")"
  case $victim in
    client) kill -9 "$cpid" 2>/dev/null ;;
    server) kill -9 "$spid" 2>/dev/null ;;
    both) kill -9 "$cpid" "$spid" 2>/dev/null ;;
  esac
  # What is left is not the point of this iteration: it goes too (its peer broke, it may wait for a while).
  sleep 0.02
  kill -9 "$cpid" "$spid" 2>/dev/null
  { wait "$cpid" "$spid"; } 2>/dev/null
  t0=$(date +%s%N)
  ok=0
  for _ in $(seq 200); do
    if reclaimed; then ok=1; break; fi
    sleep 0.01
  done
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  (( ms > worst_ms )) && worst_ms=$ms
  if ! kill -0 "$kpid" 2>/dev/null; then
    echo "iteration $i: krdmad died"; cat "$dir/krdmad.err"; exit 1
  fi
  if (( ok )); then
    echo "iteration $i: $phase, killed $victim after ${wait_ms} ms: reclaimed in ${ms} ms"
  else
    failures=$((failures + 1))
    echo "iteration $i: $phase, killed $victim after ${wait_ms} ms: NOT reclaimed after 2 s"
    "$rdmactl" --device "$device" resources
  fi
  # After a few iterations the daemon's steady state is known; later ones must not grow it.
  if (( i == 3 )); then start_fds=$(fds); start_rss=$(rss_kib); fi
done
# Sockets of aborted connections that still had bytes in flight linger up to 2 s (kal/llp/abort_linger.hpp): give
# them that long before counting.
end_fds=$(fds)
for _ in $(seq 30); do
  [[ -z $start_fds ]] || (( end_fds <= start_fds + 2 )) && break
  sleep 0.1
  end_fds=$(fds)
done
end_rss=$(rss_kib)
echo "krdmad: descriptors ${start_fds:-?} -> $end_fds, RSS ${start_rss:-?} -> $end_rss KiB; slowest reclaim ${worst_ms} ms"
if [[ -n $start_fds ]] && (( end_fds > start_fds + 2 )); then
  echo "chaos.sh: krdmad's descriptors grew"; failures=$((failures + 1))
  ls -l "/proc/$kpid/fd" | awk 'NR > 1 {print $NF}' | sed 's/[0-9][0-9]*/N/g' | sort | uniq -c
fi
if [[ -n $start_rss ]] && (( end_rss > start_rss + 16384 )); then
  echo "chaos.sh: krdmad's memory grew by more than 16 MiB"; failures=$((failures + 1))
fi
echo "chaos.sh: $iterations iterations, $failures failure(s)"
(( failures == 0 ))
