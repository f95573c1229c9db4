#!/usr/bin/env bash
# xs_hello, the extended sockets interface's example: against a private krdmad (softrnic on 127.0.0.1), its client
# writes into the server's advertised buffer, reads it back and sends registered bytes without a copy; both exit 0.
# Then with the layer off on both ends, each says the connection is not in RDMA mode and exits 2.
#   xs_hello_test.sh XS_HELLO BUILD_DIR
set -euo pipefail
hello=$1
source "$(dirname "$0")/../../scripts/private-krdmad.sh"
private_krdmad xs-hello "$2"
run_pair() {  # run_pair LABEL: server and client; their outputs in $dir/LABEL.{server,client}, statuses in rc_s, rc_c
    local label=$1 port
    for _ in 1 2 3 4 5; do
        port=$((27000 + RANDOM % 3000))
        setsid timeout 30 "$hello" -s "$port" > "$dir/$label.server" 2>&1 &
        spid=$!
        groups+=("$spid")
        for _ in $(seq 100); do grep -q "listening\|Address already" "$dir/$label.server" && break; sleep 0.05; done
        grep -q "listening" "$dir/$label.server" && break
        wait "$spid" || true
    done
    rc_c=0
    timeout 30 "$hello" -c 127.0.0.1 "$port" > "$dir/$label.client" 2>&1 || rc_c=$?
    rc_s=0
    wait "$spid" || rc_s=$?
}
run_pair rdma
if [[ $rc_s -ne 0 || $rc_c -ne 0 ]]; then
    echo "xs_hello over RDMA failed (server $rc_s, client $rc_c):"; cat "$dir/rdma.server" "$dir/rdma.client" "$dir/krdmad.err"
    exit 1
fi
grep -q 'the client wrote "hello through an RDMA Write" and sent "hello without a copy, server"' "$dir/rdma.server" ||
    { echo "the server did not see the client's bytes:"; cat "$dir/rdma.server"; exit 1; }
grep -q 'read back "hello through an RDMA Write"' "$dir/rdma.client" ||
    { echo "the client's RDMA Read did not bring the bytes back:"; cat "$dir/rdma.client"; exit 1; }
export OPENRDMA_SOCKETS=off
run_pair tcp
if [[ $rc_s -ne 2 || $rc_c -ne 2 ]] || ! grep -q "not in RDMA mode" "$dir/tcp.client"; then
    echo "with the layer off, both ends must say the connection is plain TCP and exit 2 (server $rc_s, client $rc_c):"
    cat "$dir/tcp.server" "$dir/tcp.client"
    exit 1
fi
set +e  # the cleanup kills process groups that may have ended already
echo "xs_hello: RDMA Write, Read and a send without a copy went through; with the layer off, both said plain TCP"
