#!/usr/bin/env bash
# ctest smoke test: it_rping server and client, each hosting a private embedded kAL with softrnic on 127.0.0.1,
# run 20 validated iterations. Every process started here is gone when the script ends, however it ends: the
# server runs under `timeout -s KILL` (if ctest kills this script outright) and the EXIT trap kills it otherwise.
#   smoke_test.sh IT_RPING PROVIDER_DIR
set -euo pipefail
rping=$1
providers=$2
work=$(mktemp -d /tmp/it_rping-smoke-XXXXXX)
server=
cleanup() {
  [ -n "$server" ] && kill -9 "$server" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/embedded.json" <<JSON
{"provider_dir": "$providers", "log_level": "warn", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"}]}
JSON
export OPENRDMA_EMBEDDED_CONFIG="$work/embedded.json"

# A random port may be taken (by another test run in parallel, or as a connection's ephemeral port): a server that
# says so is started again on another one, up to five times; any other failure to start is reported as it is.
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  timeout -s KILL 90 "$rping" -s -d -a 127.0.0.1 -p "$port" -S 128 >"$work/server.out" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    grep -q "listening on port" "$work/server.out" 2>/dev/null && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.05
  done
  grep -q "listening on port" "$work/server.out" && break
  wait "$server" 2>/dev/null || true
  server=
  grep -q "EADDRINUSE" "$work/server.out" || break
done
if [ -z "$server" ] || ! grep -q "listening on port" "$work/server.out"; then
  echo "it_rping server did not start:"; cat "$work/server.out"; exit 1
fi

status=0
timeout -s KILL 60 "$rping" -c -a 127.0.0.1 -p "$port" -S 128 -C 20 -V -v >"$work/client.out" 2>&1 || status=$?
cat "$work/client.out"
if [ "$status" -ne 0 ]; then
  echo "it_rping client failed with status $status; server said:"; cat "$work/server.out"; exit 1
fi
[ "$(grep -c '^ping data: rdma-ping-' "$work/client.out")" -eq 20 ] || { echo "expected 20 pings"; exit 1; }
grep -q '^ping data: rdma-ping-19: ' "$work/client.out" || { echo "the last ping is missing"; exit 1; }

sstatus=0
wait "$server" || sstatus=$?
server=
if [ "$sstatus" -ne 0 ]; then
  echo "it_rping server exited with status $sstatus:"; cat "$work/server.out"; exit 1
fi
echo "it_rping smoke test: 20 iterations validated, server and client exited 0"
