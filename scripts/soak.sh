#!/usr/bin/env bash
# Soak: many QPs moving verified data through one real krdmad for a long time, memory watched.
#   bash scripts/soak.sh [SECONDS] [PAIRS] [BUILD_DIR]     (default 3600 s, 32 pairs = 64 QPs, ./build)
# PAIRS it_rping servers and clients (each exchange is a Send, an RDMA Read and an RDMA Write, every byte verified
# by both sides; message sizes vary per pair from 1 KiB to 64 KiB) run through one krdmad on a private device path
# at the lowest CPU priority. Every minute the script samples krdmad's RSS and descriptors and the consumers' total
# RSS; at the end it checks that no pair failed (a data mismatch or a broken connection ends it), and that memory
# after the first sample stayed within 10% (krdmad) and 10% (consumers). Prints the samples and a verdict; exit 0
# when it held. Everything it starts is killed on exit.
set -uo pipefail
seconds=${1:-3600}
pairs=${2:-32}
build=${3:-$(cd "$(dirname "$0")/.." && pwd)/build}
source "$(dirname "$0")/private-krdmad.sh"
private_krdmad soak.sh "$build"

sizes=(1024 4096 16384 32768 65535)
clients=()
port_base=$(( 30000 + RANDOM % 10000 ))
for i in $(seq 0 $((pairs - 1))); do
  size=${sizes[$((i % ${#sizes[@]}))]}
  port=$((port_base + i))
  setsid nice -n 19 "$rping" -s -d -a 127.0.0.1 -p "$port" -S "$size" -C 0 > "$dir/server$i.out" 2>&1 &
  groups+=("$!")
  for _ in $(seq 200); do grep -q "listening on port" "$dir/server$i.out" && break; sleep 0.02; done
  setsid nice -n 19 "$rping" -c -a 127.0.0.1 -p "$port" -S "$size" -C 0 -V > "$dir/client$i.out" 2>&1 &
  groups+=("$!")
  clients+=("$!")
done

kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
consumers_kib() {
  local total=0 p
  for p in "${groups[@]:1}"; do total=$((total + $(kib "$p"))); done
  echo "$total"
}
alive() {
  local n=0 p
  for p in "${groups[@]:1}"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
  echo "$n"
}
echo "soak.sh: $pairs pairs ($((2 * pairs)) QPs) for $seconds s"
printf '%8s %14s %10s %16s %8s\n' "seconds" "krdmad KiB" "fds" "consumers KiB" "alive"
first_k="" first_c=""
end=$((SECONDS + seconds))
while (( SECONDS < end )); do
  sleep $(( end - SECONDS < 60 ? (end - SECONDS > 0 ? end - SECONDS : 1) : 60 ))
  k=$(kib "$kpid"); c=$(consumers_kib); f=$(ls "/proc/$kpid/fd" 2>/dev/null | wc -l); a=$(alive)
  printf '%8d %14s %10s %16s %8s\n' "$SECONDS" "$k" "$f" "$c" "$a"
  [[ -z $first_k ]] && { first_k=$k; first_c=$c; }
  kill -0 "$kpid" 2>/dev/null || { echo "soak.sh: krdmad died"; cat "$dir/krdmad.err"; exit 1; }
done
failed=0
a=$(alive)
if (( a != 2 * pairs )); then
  echo "soak.sh: only $a of $((2 * pairs)) consumers still run; what the ended ones said:"
  for i in $(seq 0 $((pairs - 1))); do
    kill -0 "${groups[$((2 * i + 1))]}" 2>/dev/null || { echo "server $i:"; tail -3 "$dir/server$i.out"; }
    kill -0 "${groups[$((2 * i + 2))]}" 2>/dev/null || { echo "client $i:"; tail -3 "$dir/client$i.out"; }
  done
  failed=1
fi
# What moved, from krdmad's counters (the RNIC's totals over the live endpoints).
"$rdmactl" --device "$device" stats | grep -A2 "^Per RNIC"
if [[ -n $first_k ]]; then
  (( k * 10 > first_k * 11 )) && { echo "soak.sh: krdmad's RSS grew more than 10%"; failed=1; }
  (( c * 10 > first_c * 11 )) && { echo "soak.sh: the consumers' RSS grew more than 10%"; failed=1; }
fi
"$rdmactl" --device "$device" limits
(( failed == 0 )) && echo "soak.sh: passed" || echo "soak.sh: FAILED"
(( failed == 0 ))
