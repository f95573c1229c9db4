#!/usr/bin/env bash
# bench_sockets: the sockets layer (openrdma-run) against plain TCP, measured in the same run with the same Debian
# programs, alternating the two in rounds and keeping the best of each: iperf3 throughput and sockperf ping-pong
# latency on one host (same-host path) and between two network namespaces (iWARP over a veth pair; root only),
# connection setup (conn_rate: connect + accept + a byte each way), and a program the layer does not accelerate
# (openrdma-run --off) against the same program without the layer.
#   sockets_bench.sh BUILD_DIR [--seconds S] [--rounds N] [--only WORDS] [--connections N (setup, default 300)]
set -euo pipefail
build=$1; shift
seconds=2 rounds=3 only="" connections=300
while [[ $# -gt 0 ]]; do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        *) echo "unknown option $1"; exit 2 ;;
    esac
done
for p in iperf3 sockperf python3; do command -v "$p" > /dev/null || { echo "bench_sockets: $p is missing"; exit 1; }; done
source "$(dirname "$0")/../scripts/private-krdmad.sh"
private_krdmad bench-sockets "$build"
run=$build/tools/openrdma-run/openrdma-run
rate=$build/bench/conn_rate
ns="" veth_a=""
trap 'private_krdmad_cleanup; [[ -n $ns ]] && ip netns del "$ns" 2>/dev/null; [[ -n $veth_a ]] && ip link del "$veth_a" 2>/dev/null; true' EXIT

# A port no socket uses, below the ephemeral range and the tests' ports.
port() { free_port 32000 700 || echo 32767; }
wait_listen() { port_listens "$1"; }

# iperf3 WRAP_SERVER WRAP_CLIENT ADDR [NS]: Gbit/s received (the best of nothing else: one run).
iperf() {
    local p; p=$(port)
    setsid $1 iperf3 -s -1 -B "$3" -p "$p" > /dev/null 2>&1 &
    groups+=("$!")
    wait_listen "$p"
    local j
    j=$(${4:+ip netns exec "$4"} $2 iperf3 -c "$3" -p "$p" -t "$seconds" -J 2>/dev/null)
    python3 -c 'import json,sys; print("%.2f" % (json.loads(sys.argv[1])["end"]["sum_received"]["bits_per_second"] / 1e9))' "$j"
}
# sockperf WRAP_SERVER WRAP_CLIENT ADDR [NS]: average one-way latency in microseconds (64-byte ping-pong).
latency() {
    local p; p=$(port)
    setsid $1 sockperf sr --tcp -i "$3" -p "$p" > /dev/null 2>&1 &
    local s=$!
    groups+=("$s")
    wait_listen "$p"
    ${4:+ip netns exec "$4"} $2 sockperf pp --tcp -i "$3" -p "$p" -t "$seconds" -m 64 2>&1 |
        sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p'
    kill -9 -- "-$s" 2>/dev/null || true
}
# conn_rate WRAP: connections per second. Through the layer, the CPU each process spent per connection goes to
# $dir/setup-cpu (printed after the figure: where a setup's time goes).
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }  # clock ticks, user + system
setup() {
    local p; p=$(port)
    setsid $1 "$rate" server "$p" > /dev/null 2>&1 &
    local s=$!
    groups+=("$s")
    wait_listen "$p"
    local k0 s0 out
    k0=$(cpu_of "$kpid"); s0=$(cpu_of "$s")
    out=$($1 "$rate" client "$p" "$connections")
    if [[ $1 != env ]]; then
        local hz; hz=$(getconf CLK_TCK)
        printf 'client %s us, server %s us, krdmad %s us\n' "$(sed -n 's/^cpu_us //p' <<< "$out")" \
            "$(( ($(cpu_of "$s") - s0) * 1000000 / hz / connections ))" \
            "$(( ($(cpu_of "$kpid") - k0) * 1000000 / hz / connections ))" > "$dir/setup-cpu"
    fi
    sed -n 's/^rate //p' <<< "$out"
    kill -9 -- "-$s" 2>/dev/null || true
}

best() {  # best max|min VALUES...
    local how=$1; shift
    printf '%s\n' "$@" | sort -g | { if [[ $how == max ]]; then tail -1; else head -1; fi; }
}
# figure NAME UNIT HOW TARGET CMD_LAYER CMD_BASE: alternates the two in rounds, keeps the best, prints the ratio.
figure() {
    local name=$1 unit=$2 how=$3 target=$4 a=() b=()
    [[ -n $only && $name != *"$only"* ]] && return 0
    for _ in $(seq "$rounds"); do
        a+=("$(eval "$5")")
        b+=("$(eval "$6")")
    done
    local x y
    x=$(best "$how" "${a[@]}"); y=$(best "$how" "${b[@]}")
    printf '%-44s %10s %-6s against %10s  ratio %6s  (target %s)\n' "$name" "$x" "$unit" "$y" \
        "$(python3 -c "print('%.2f' % ($x / $y if $y else 0))")" "$target"
}

echo "bench_sockets: each figure beside plain TCP in the same run, best of $rounds rounds of $seconds s"
figure "iperf3 one host (same-host path)" Gbit/s max ">= 3x" "iperf $run $run 127.0.0.1" "iperf env env 127.0.0.1"
figure "sockperf 64 B latency one host" us min "<= 0.3x" "latency $run $run 127.0.0.1" "latency env env 127.0.0.1"
figure "connection setup one host" conn/s max ">= 0.5x" "setup $run" "setup env"
[[ -s $dir/setup-cpu ]] && echo "  CPU per connection through the layer (last round): $(cat "$dir/setup-cpu")"
figure "iperf3 not accelerated (--off)" Gbit/s max ">= 0.98x" "iperf '$run --off' '$run --off' 127.0.0.1" \
    "iperf env env 127.0.0.1"
if [[ $(id -u) -ne 0 ]]; then
    echo "two hosts: skipped (network namespaces need root)"
    exit 0
fi
# Two hosts: a namespace joined by a veth pair, a krdmad in each with an RNIC on its veth address.
sub=$(( $$ % 16384 )); net="10.233.$(( sub / 64 ))."
addr_a="$net$(( sub % 64 * 4 + 1 ))"; addr_b="$net$(( sub % 64 * 4 + 2 ))"
ns="orskb$$"; veth_a="obA$(( $$ % 100000 ))"; veth_b="obB$(( $$ % 100000 ))"
ip netns add "$ns"
ip link add "$veth_a" type veth peer name "$veth_b"
ip link set "$veth_b" netns "$ns"
ip addr add "$addr_a/30" dev "$veth_a"; ip link set "$veth_a" up
ip netns exec "$ns" sh -c "ip addr add $addr_b/30 dev $veth_b && ip link set $veth_b up && ip link set lo up"
for h in a b; do
    v="addr_$h"
    printf '{"device": "%s", "provider_dir": "%s", "modules": ["softrnic_kvp.so"], "rnics": [{"provider": "softrnic", "name": "sr%s", "address": "%s"}], "log_level": "warn"}\n' \
        "$dir/krdma-$h" "$build/providers" "$h" "${!v}" > "$dir/krdmad-$h.json"
done
setsid "$krdmad" --config "$dir/krdmad-a.json" > "$dir/a.out" 2>&1 &
groups+=("$!")
setsid ip netns exec "$ns" "$krdmad" --config "$dir/krdmad-b.json" > "$dir/b.out" 2>&1 &
groups+=("$!")
for _ in $(seq 100); do grep -q "ready on" "$dir/a.out" && grep -q "ready on" "$dir/b.out" && break; sleep 0.05; done
srv="env KRDMA_DEVICE=$dir/krdma-a $run"
cli="env KRDMA_DEVICE=$dir/krdma-b $run"
figure "iperf3 two hosts (wire)" Gbit/s max ">= 0.9x" "iperf '$srv' '$cli' $addr_a $ns" "iperf env env $addr_a $ns"
figure "sockperf 64 B latency two hosts" us min "<= 1.2x" "latency '$srv' '$cli' $addr_a $ns" "latency env env $addr_a $ns"
