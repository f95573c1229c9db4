#!/usr/bin/env bash
# it_hello, the C example programmers start from: its server and client, each a process with an embedded kAL
# (softrnic on 127.0.0.1), exchange their greetings and both exit 0. The server is killed whatever happens.
set -euo pipefail
hello="$1"
export OPENRDMA_EMBEDDED_CONFIG="$2"
out=$(mktemp -d)
server=""
cleanup() { [[ -n "$server" ]] && kill -9 "$server" 2>/dev/null || true; rm -rf "$out"; }
trap cleanup EXIT
# A port below the ephemeral range; another one when something else holds it.
for _ in 1 2 3 4 5; do
    port=$((22000 + RANDOM % 5000))
    timeout 30 "$hello" -s -i 127.0.0.1 -p "$port" > "$out/server" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q "listening\|failed" "$out/server" && break; sleep 0.05; done
    grep -q "listening" "$out/server" && break
    wait "$server" || true
    server=""
done
[[ -n "$server" ]] || { echo "the server never listened:"; cat "$out/server"; exit 1; }
timeout 30 "$hello" -c 127.0.0.1 -i 127.0.0.1 -p "$port" > "$out/client" 2>&1 || { cat "$out/client" "$out/server"; exit 1; }
wait "$server" || { echo "server failed:"; cat "$out/server"; exit 1; }
server=""
grep -q 'the client says "hello from the client"' "$out/server" || { cat "$out/server"; exit 1; }
grep -q 'the server says "hello from the server"' "$out/client" || { cat "$out/client"; exit 1; }
echo "it_hello: both sides done"
