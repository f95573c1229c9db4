#!/usr/bin/env bash
# Connection scale, many times over: Debian's unmodified dtestcm (uDAPL) through a private krdmad, RUNS runs in a
# row of CONNECTIONS connections each (both ends on one host: twice as many QPs on one softrnic RNIC).
#   bash scripts/dtestcm-soak.sh [CONNECTIONS] [RUNS] [BUILD_DIR]     (default 1000 connections, 20 runs, ./build)
# Each run has its own krdmad, dat.conf and, as root, its own network namespace (dtestcm listens on fixed ports,
# 15828 and 45248 up: other dtests and their TIME_WAITs cannot collide). A run passes when both programs exit 0
# having connected every connection and completed; one that has not ended after 120 s is a hang: the stacks of the
# client, the server and krdmad are kept (gdb) with the device sockets' queues (ss -xp). Prints a line per run and
# a verdict; exit 0 when every run passed. The issue 42 hang (each side of the device socket waiting for the other)
# showed in 20-30% of 1,000-connection runs.
set -uo pipefail

# One run, in the current network namespace: prints PASS or FAIL and returns accordingly.
one_run() {
  local r=$1 d=$top/run$1
  mkdir -p "$d"
  [[ $EUID -eq 0 ]] && ip link set lo up
  cat > "$d/krdmad.json" <<JSON
{"device": "$d/krdma", "provider_dir": "$build/providers", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}], "log_level": "warn"}
JSON
  echo "openrdma u2.0 nonthreadsafe default $lib dapl.2.0 \"127.0.0.1\" \"\"" > "$d/dat.conf"
  export DAT_OVERRIDE=$d/dat.conf KRDMA_DEVICE=$d/krdma
  unset OPENRDMA_EMBEDDED_CONFIG
  setsid "$build/kal/krdmad" --config "$d/krdmad.json" > "$d/krdmad.out" 2> "$d/krdmad.err" &
  local k=$! s c _ t0=$SECONDS
  for _ in $(seq 200); do grep -q "ready on" "$d/krdmad.out" 2>/dev/null && break; sleep 0.05; done
  setsid stdbuf -oL "$dtestcm" -P openrdma -s -m -c "$n" -b 20 > "$d/server.out" 2>&1 &
  s=$!
  for _ in $(seq 400); do ss -Hltn 'sport = :15828' | grep -q . && break; sleep 0.05; done
  setsid stdbuf -oL "$dtestcm" -P openrdma -h 127.0.0.1 -m -c "$n" -b 20 > "$d/client.out" 2>&1 &
  c=$!
  for _ in $(seq 1200); do kill -0 "$c" 2>/dev/null || break; sleep 0.1; done
  local hung=0
  if kill -0 "$c" 2>/dev/null; then
    hung=1
    for p in "client $c" "server $s" "krdmad $k"; do
      set -- $p
      timeout 30 gdb -nx -batch -ex 'thread apply all bt' -p "$2" > "$d/stack.$1" 2>&1
    done
    ss -xp > "$d/ss.out" 2>&1
  fi
  for _ in $(seq 200); do kill -0 "$s" 2>/dev/null || break; sleep 0.1; done
  kill -9 -- "-$c" "-$s" 2>/dev/null
  local crc src
  wait "$c"; crc=$?
  wait "$s"; src=$?
  kill -9 -- "-$k" 2>/dev/null
  wait "$k" 2>/dev/null
  if (( !hung && crc == 0 && src == 0 )) && grep -q "ALL $n CONNECTED on Client" "$d/client.out" &&
     grep -q "ALL $n CONNECTED on Server" "$d/server.out" &&
     [[ $(cat "$d/client.out" "$d/server.out" | grep -c "DAPL Connection Test Complete") == 2 ]]; then
    echo "run $r: PASS in $((SECONDS - t0)) s"
    rm -rf "$d"
    return 0
  fi
  echo "run $r: FAIL (client $crc, server $src$( ((hung)) && echo ", hung: stacks in $d")): $(grep -h 'ERR\|rror' \
    "$d/client.out" "$d/server.out" | head -3 | tr '\n' '|')"
  return 1
}

if [[ ${1:-} == --one-run ]]; then  # the namespaced child of the loop below
  n=$3 build=$4 top=$5 lib=$6 dtestcm=$7
  one_run "$2"
  exit
fi
n=${1:-1000}
runs=${2:-20}
build=${3:-$(cd "$(dirname "$0")/.." && pwd)/build}
dtestcm=$(command -v dtestcm || echo /usr/bin/dtestcm)
[[ -x $dtestcm ]] || { echo "dtestcm-soak.sh: dtestcm is missing (apt install dapl2-utils)" >&2; exit 2; }
[[ -x $build/kal/krdmad ]] || { echo "dtestcm-soak.sh: $build/kal/krdmad is missing: build first" >&2; exit 2; }
lib=$(ls "$build"/api/dapl/libdaplopenrdma.so.2* 2>/dev/null | head -1)
[[ -n $lib ]] || { echo "dtestcm-soak.sh: no libdaplopenrdma in $build/api/dapl" >&2; exit 2; }
(( n % 20 == 0 )) || { echo "dtestcm-soak.sh: CONNECTIONS must be a multiple of 20 (the burst)" >&2; exit 2; }
top=$(mktemp -d /tmp/dtestcm-soak-XXXXXX)
failed=0
echo "dtestcm-soak.sh: $runs runs of $n connections ($((2 * n)) QPs on one RNIC), work in $top"
for r in $(seq 1 "$runs"); do
  if [[ $EUID -eq 0 ]]; then
    unshare -n bash "$0" --one-run "$r" "$n" "$build" "$top" "$lib" "$dtestcm" || failed=$((failed + 1))
  else
    one_run "$r" || failed=$((failed + 1))
  fi
done
if (( failed == 0 )); then
  echo "dtestcm-soak.sh: all $runs runs passed"
  rm -rf "$top"
  exit 0
fi
echo "dtestcm-soak.sh: $failed of $runs runs failed (kept in $top)"
exit 1
