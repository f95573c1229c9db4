#!/usr/bin/env bash
# ctest smoke test: it_perf --loopback (a forked server and the client, each hosting a private embedded kAL with
# softrnic on 127.0.0.1) runs Send, Write and Read, bandwidth and latency, at 4 KiB, and every row has its RDMA
# figure, its TCP figure and a ratio. it_perf reaps its server itself on every way out; `timeout -s KILL` bounds the
# run, and the server dies with it (PR_SET_PDEATHSIG).
#   smoke_test.sh IT_PERF PROVIDER_DIR
set -euo pipefail
perf=$1
providers=$2
work=$(mktemp -d /tmp/it_perf-smoke-XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/embedded.json" <<JSON
{"provider_dir": "$providers", "log_level": "warn", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]}
JSON
export OPENRDMA_EMBEDDED_CONFIG="$work/embedded.json"
timeout -s KILL 100 "$perf" --loopback -t send,write,read --bw --lat --iters 200 --size 4096 \
  --json "$work/out.json" --csv "$work/out.csv"
rows=$(grep -c '"kind":' "$work/out.json")
measured=$(grep -c '"bytes_per_second"\|"t_typical_us"' "$work/out.json")
[ "$rows" -eq 6 ] || { echo "expected 6 rows, got $rows"; cat "$work/out.json"; exit 1; }
[ "$measured" -eq 12 ] || { echo "expected an RDMA and a TCP figure per row"; cat "$work/out.json"; exit 1; }
if grep -q '"ratio": null' "$work/out.json"; then echo "a row has no ratio"; cat "$work/out.json"; exit 1; fi
[ "$(wc -l <"$work/out.csv")" -eq 7 ] || { echo "expected a CSV header and 6 rows"; exit 1; }
echo "it_perf smoke test: 6 rows measured on RDMA and TCP"

# --sweep alone: every size the targets name (bandwidth 64 B .. 8 MiB for Write and Send, latency 8 B .. 1 MiB for
# Write, Send and Read: 18 + 18 + 3 x 18 = 90 rows), and one verdict line per series.
timeout -s KILL 100 "$perf" --loopback --sweep --iters 2 --rounds 1 --json "$work/sweep.json" >"$work/sweep.txt"
rows=$(grep -c '"kind":' "$work/sweep.json")
[ "$rows" -eq 90 ] || { echo "--sweep: expected 90 rows, got $rows"; cat "$work/sweep.txt"; exit 1; }
if grep -q '"ratio": null' "$work/sweep.json"; then echo "--sweep: a row has no ratio"; exit 1; fi
verdicts=$(grep -c 'of 18 sizes met' "$work/sweep.txt")
[ "$verdicts" -eq 5 ] || { echo "--sweep: expected 5 series verdicts, got $verdicts"; cat "$work/sweep.txt"; exit 1; }
echo "it_perf smoke test: --sweep measured 90 rows with a verdict per series"

# Several QPs: the TCP baseline is as many streams, written round-robin (the server reads them all at once).
timeout -s KILL 100 "$perf" --loopback -t write --bw --qps 8 --window 4 --iters 400 --size 16K --json "$work/qps.json" >/dev/null
grep -q '"qps": 8' "$work/qps.json" || { echo "--qps 8: no row of 8 QPs"; cat "$work/qps.json"; exit 1; }
if grep -q '"ratio": null' "$work/qps.json"; then echo "--qps 8: no ratio"; cat "$work/qps.json"; exit 1; fi
echo "it_perf smoke test: 8 QPs against 8 TCP streams"

# The setup rate: batches of connections in flight, RDMA against TCP; every batch established and torn down.
timeout -s KILL 100 "$perf" --loopback --setup --inflight 4,32 --iters 64 --rounds 1 >"$work/setup.txt"
lines=$(grep -cE '^(4|32) +[0-9]+ +[0-9]+ +[0-9.]+ +\(target >= 0.50' "$work/setup.txt")
[ "$lines" -eq 2 ] || { echo "--setup: expected a rate for 4 and 32 in flight"; cat "$work/setup.txt"; exit 1; }
if grep -qE '^(4|32) +0 ' "$work/setup.txt"; then echo "--setup: no RDMA rate"; cat "$work/setup.txt"; exit 1; fi
# Where the time went: each step with its time, and the work of the client and of its server per connection.
for step in create connect establish disconnect destroy; do
    grep -qE "^    $step +[0-9.]+ us" "$work/setup.txt" || { echo "--setup: no time for step $step"; cat "$work/setup.txt"; exit 1; }
done
work_lines=$(grep -cE '^    work, connect to established: +it_perf [0-9.?]+ syscalls, [0-9.]+ switches; +server ' "$work/setup.txt")
[ "$work_lines" -eq 2 ] || { echo "--setup: expected the client's and the server's work at 4 and 32 in flight"; cat "$work/setup.txt"; exit 1; }
echo "it_perf smoke test: setup rate at 4 and 32 in flight, with where the time went"
