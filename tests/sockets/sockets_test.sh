#!/usr/bin/env bash
# The sockets layer with unmodified programs (Debian's nc, socat, iperf3, sockperf, and sockprobe, a plain sockets
# program of the tests) against a private krdmad with softrnic on 127.0.0.1: every byte checked, and what each
# process decided read back from `rdmactl sockets`.
#   sockets_test.sh CASE BUILD_DIR SOCKPROBE [SANITIZER_RUNTIME]
# A sanitizer build's library needs its runtime first in these uninstrumented programs: it is preloaded before it.
set -euo pipefail
# A command that fails under set -e says which, before the cleanup runs.
trap 'echo "FAILED: line $LINENO: $BASH_COMMAND (status $?)"' ERR
case_=$1
build=$2
probe=$3
runtime=${4:-}
lib=$build/api/sockets/libopenrdma_sockets.so
source "$(dirname "$0")/../../scripts/private-krdmad.sh"
private_krdmad sockets "$build"
unset OPENRDMA_SOCKETS OPENRDMA_SOCKETS_POLICY
export OPENRDMA_LOG=info  # the layer says which connections it converted
# The server's log says it converted a connection (the checks below would pass over plain TCP too).
converted() { grep -q "converted to RDMA" "$dir/server.err" || fail "the server converted no connection"; }

# What runs a program with the layer (as openrdma-run does; with a sanitizer's runtime before the library when there
# is one), and without it. Commands, not functions: setsid and bash -c run them.
if [[ -n $runtime ]]; then
    layer=(env ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 "LD_PRELOAD=$runtime $lib")
else
    layer=("$build/tools/openrdma-run/openrdma-run")
fi
plain=(env)

fail() {
    echo "FAILED: $*"
    for f in "$dir"/*.log "$dir"/*.err; do [[ -s $f ]] && { echo "--- $(basename "$f")"; tail -c 2000 "$f"; echo; }; done
    echo "--- krdmad"; tail -20 "$dir/krdmad.err"
    exit 1
}

# A port no socket uses, in any state: below the kernel's ephemeral range (32768-60999 by default, where a client
# socket of a test running beside this one may hold it), away from the other tests' ports (it_hello 22000-26999,
# xs_hello 27000-29999, dapltest 21000).
test_port() { free_port 30000 2000; }
wait_listen() { port_listens "$1" || fail "nothing listened on port $1"; }
# start_probe_server SECONDS MODE [ARGS...]: sockprobe's MODE server under the layer on a free port ($port), bounded
# by SECONDS, its pid in $spid; it listens when this returns.
start_probe_server() {
    local seconds=$1 mode=$2
    shift 2
    port=$(test_port)
    start server layer timeout "$seconds" "$probe" "$mode" "$port" "$@"
    spid=$started
    wait_listen "$port"
}
start() {  # start NAME layer|plain CMD...: in its own process group, killed at exit whatever happens
    local name=$1 how=$2; shift 2
    local -n wrap=$how
    setsid "${wrap[@]}" "$@" > "$dir/$name.log" 2> "$dir/$name.err" &
    started=$!
    groups+=("$started")
}
# Waits up to 10 s until `rdmactl sockets` lists, for process PID, a connection decided DECISION on path PATH.
expect_decision() {
    local pid=$1 decision=$2 path=$3
    for _ in $(seq 100); do
        "$rdmactl" --json sockets > "$dir/rdmactl.json" 2>&1 || true
        if python3 - "$dir/rdmactl.json" "$pid" "$decision" "$path" <<'PY'
import json, sys
reports = json.load(open(sys.argv[1]))
ok = any(r["pid"] == int(sys.argv[2]) and any(c["decision"] == sys.argv[3] and c["path"] == sys.argv[4]
         for c in r["connections"]) for r in reports)
sys.exit(0 if ok else 1)
PY
        then return 0; fi
        sleep 0.1
    done
    fail "process $pid never showed a connection decided $decision on path $path: $(cat "$dir/rdmactl.json")"
}

# Waits up to 10 s until `rdmactl sockets` counts, for process PID, at least one decision REASON.
expect_count() {
    local pid=$1 reason=$2
    for _ in $(seq 100); do
        "$rdmactl" --json sockets > "$dir/rdmactl.json" 2>&1 || true
        python3 - "$dir/rdmactl.json" "$pid" "$reason" <<'PY' && return 0
import json, sys
reports = json.load(open(sys.argv[1]))
sys.exit(0 if any(r["pid"] == int(sys.argv[2]) and r["decisions"].get(sys.argv[3], 0) > 0 for r in reports) else 1)
PY
        sleep 0.1
    done
    fail "process $pid never counted a decision $reason: $(cat "$dir/rdmactl.json")"
}

payload=$dir/payload.bin
head -c 3000000 /dev/urandom > "$payload"

# The nc process of session @p 1 (it starts behind timeout and a pipeline), waited for up to 5 s.
nc_of() {
    local pid
    for _ in $(seq 100); do pid=$(pgrep -s "$1" -x nc | head -1); [[ -n $pid ]] && break; sleep 0.05; done
    echo "$pid"
}

# nc_pair SERVER_WRAPPER CLIENT_WRAPPER DECISION_SERVER DECISION_CLIENT PATH: nc moves the payload; the client keeps
# its connection open until both decisions were read (its input ends when this closes the FIFO it holds: a busy
# machine's slow rdmactl once outlasted a client that closed after a fixed 1.5 s).
nc_pair() {
    local port spid cpid sn cn hold
    port=$(test_port)
    start server "$1" timeout 30 nc -l 127.0.0.1 "$port"
    spid=$started
    wait_listen "$port"
    # The received bytes are the server's standard output; the client's input is the payload, then the FIFO.
    mkfifo "$dir/hold"
    exec {hold}<>"$dir/hold"
    local -n cwrap=$2
    # (The client closes its inherited copy of this script's end first: a writer of its own would keep it open.)
    start client plain bash -c 'eval "exec $1>&-"; cat "$2" - < "$3" | "${@:4}"' _ "$hold" "$payload" "$dir/hold" \
           "${cwrap[@]}" timeout 30 nc -N 127.0.0.1 "$port"
    cpid=$started
    sn=$(nc_of "$spid")
    cn=$(nc_of "$cpid")
    [[ -n $sn && -n $cn ]] || fail "no nc process under the server ($sn) or the client ($cn)"
    [[ $3 != - ]] && expect_decision "$sn" "$3" "$5"
    [[ $4 != - ]] && expect_decision "$cn" "$4" "$5"
    exec {hold}>&-
    wait "$cpid" || fail "the client failed"
    for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
    cmp "$payload" "$dir/server.log" || fail "the server did not receive the payload intact"
}

case $case_ in
nc_both)
    nc_pair layer layer rdma rdma same-host ;;
nc_client_only)
    # Only the client runs the layer: its peer said nothing in the handshake, the connection stays TCP.
    nc_pair plain layer - peer-plain tcp ;;
nc_server_only)
    nc_pair layer plain peer-plain - tcp ;;
policy_tcp)
    # The policy leaves the port to TCP: decided "policy", bytes intact.
    port=$(test_port)
    export OPENRDMA_SOCKETS_POLICY="{\"rules\": [{\"action\": \"tcp\", \"ports\": \"$port\"}]}"
    start server layer timeout 30 nc -l 127.0.0.1 "$port"
    spid=$started
    wait_listen "$port"
    expect_count "$(nc_of "$spid")" policy
    "${layer[@]}" timeout 30 nc -N 127.0.0.1 "$port" < "$payload" > /dev/null 2> "$dir/client.log" || fail "the client failed"
    for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
    cmp "$payload" "$dir/server.log" || fail "the payload changed"
    ;;
socat_fork_echo)
    # A forking server (socat's fork: a child per connection serves it) echoing through cat; three clients in turn.
    port=$(test_port)
    start server layer timeout 60 socat TCP-LISTEN:"$port",reuseaddr,fork EXEC:cat
    wait_listen "$port"
    for i in 1 2 3; do
        "${layer[@]}" timeout 30 socat -t 5 - TCP:127.0.0.1:"$port" < "$payload" > "$dir/echo$i.bin" 2> "$dir/client$i.log" ||
            fail "client $i failed"
        cmp "$payload" "$dir/echo$i.bin" || fail "client $i did not get its bytes back"
    done
    converted
    ;;
probe_epoll_echo)
    # Edge-triggered epoll on a converted socket, MSG_PEEK, FIONREAD, writev, half-close, non-blocking I/O.
    start_probe_server 30 server
    "${layer[@]}" timeout 30 "$probe" client "$port" 5000000 > "$dir/client.log" 2>&1 || fail "the probe's client failed"
    grep -q "ok 5000000" "$dir/client.log" || fail "the probe's client did not get every byte back"
    wait "$spid" || fail "the probe's server failed"
    grep -q "echoed until end of file" "$dir/server.log" || fail "the server did not see the half-close"
    converted
    ;;
probe_fork_echo)
    # A forking server whose children echo with blocking I/O, close and _exit: every echoed byte arrives, twice.
    start_probe_server 60 forking 2
    for i in 1 2; do
        "${layer[@]}" timeout 30 "$probe" client "$port" 4000000 > "$dir/client$i.log" 2>&1 ||
            fail "client $i did not get every byte back"
    done
    wait "$spid" || fail "the forking server failed"
    converted
    ;;
probe_exec_echo|probe_reexec)
    # exec. probe_exec_echo, inetd's way: a child per accepted connection executes a program with it as standard
    # input and output; the connection was not converted before exec, and the new program's layer takes it over from
    # the detection map. probe_reexec: a server executes its new binary keeping its listener, which stays marked, and
    # the connections the new program accepts convert.
    if [[ $case_ == probe_exec_echo ]]; then
        mode=execing server_is="the server that executes a program per connection"
    else
        mode=reexec server_is="the re-executed server"
    fi
    start_probe_server 60 "$mode" 2
    for i in 1 2; do
        "${layer[@]}" timeout 30 "$probe" client "$port" 3000000 > "$dir/client$i.log" 2>&1 ||
            fail "client $i did not get every byte back from $server_is: $(cat "$dir/client$i.log")"
    done
    wait "$spid" || fail "$server_is failed: $(cat "$dir/server.err")"
    grep -c "converted to RDMA" "$dir/server.err" | grep -qx 2 ||
        fail "$server_is did not convert the connections it served: $(cat "$dir/server.err")"
    ;;
probe_sendfile)
    # sendfile(2) on a converted socket (a file server's way): the file's bytes echoed back intact.
    start_probe_server 30 server
    "${layer[@]}" timeout 30 "$probe" sendfile "$port" "$payload" > "$dir/client.log" 2> "$dir/client.err" ||
        fail "the file sent with sendfile did not come back intact: $(tail -3 "$dir/client.err")"
    grep -q "sent 3000000 bytes with sendfile" "$dir/client.log" || fail "sendfile did not send the whole file"
    wait "$spid" || fail "the server failed"
    grep -q "converted to RDMA" "$dir/client.err" || fail "the client did not convert its connection"
    converted
    ;;
probe_churn|probe_churn_qps)
    # Connections in turn between the same two processes, each connection's bytes its own. probe_churn: the first
    # converts through the kAL, which gives the two processes a link; the next ones convert over the link (a byte
    # channel the server makes, no QP, no kAL). probe_churn_qps, links off: once a connection ended, its QP, CQ and
    # buffers serve the next (brought back to IDLE, not destroyed and made again).
    [[ $case_ == probe_churn_qps ]] && export OPENRDMA_SOCKETS_LINKS=0
    start_probe_server 60 reexec 30
    "${layer[@]}" timeout 60 "$probe" churn "$port" 30 200000 > "$dir/client.log" 2> "$dir/client.err" ||
        fail "a connection of the churn did not get its own bytes back: $(tail -5 "$dir/client.err")"
    grep -q "churned 30 connections" "$dir/client.log" || fail "the churn did not finish"
    wait "$spid" || fail "the server failed"
    for side in server client; do
        c=$(grep -c "converted to RDMA" "$dir/$side.err" || true)
        [[ $c -eq 30 ]] || fail "the $side converted $c of its 30 connections"
        if [[ $case_ == probe_churn ]]; then
            r=$(grep -c "over the link to its peer" "$dir/$side.err" || true)
            echo "the $side converted $r of 30 connections over the link"
            (( r == 29 )) || fail "the $side converted $r of 30 connections over the link, where all but the first should: $(grep -v "over the link" "$dir/$side.err" | tail -5)"
        else
            r=$(grep -c "on a QP reused" "$dir/$side.err" || true)
            echo "the $side reused a QP for $r of 30 connections"; (( r >= 15 )) || fail "the $side reused the QP of an ended connection for only $r of 30 (a QP and its CQ made and destroyed per connection); the layer's reasons: $(grep -h "not kept\|not reused" "$dir/$side.err" | sort | uniq -c)"
        fi
    done
    ;;
probe_link_unknown)
    # Two server processes share a port (SO_REUSEPORT); one client connects 24 times. A connection that reaches the
    # server process the client has no link with is answered "no such link" and converts through the kAL on the same
    # connection (then gets its own link); every connection's bytes come back.
    port=$(test_port)
    for n in 1 2; do
        start server$n layer timeout 60 "$probe" reuseport "$port"
        for _ in $(seq 100); do grep -q listening "$dir/server$n.log" 2>/dev/null && break; sleep 0.05; done
    done
    "${layer[@]}" timeout 60 "$probe" churn "$port" 24 100000 > "$dir/client.log" 2> "$dir/client.err" ||
        fail "a connection did not get its own bytes back: $(tail -5 "$dir/client.err")"
    c=$(grep -c "converted to RDMA" "$dir/client.err" || true)
    l=$(grep -c "over the link to its peer" "$dir/client.err" || true)
    u=$(grep -c "holds no such link" "$dir/client.err" || true)
    echo "the client converted $c of 24 connections, $l over a link, $u answered \"no such link\""
    [[ $c -eq 24 ]] || fail "the client converted $c of its 24 connections: $(tail -5 "$dir/client.err")"
    (( l >= 1 )) || fail "no connection went over a link"
    (( u >= 1 )) || fail "no connection reached the other server process with the first one's link (the hash sent all 24 to one process?)"
    ;;
ipv6)
    # IPv6: nc over ::1, through a krdmad of its own whose RNIC serves ::1; every byte checked.
    ip -6 addr show dev lo 2>/dev/null | grep -q "::1" || { echo "ipv6: no ::1 on lo here"; exit 0; }
    cat > "$dir/krdmad6.json" <<JSON
{"device": "$dir/krdma6", "provider_dir": "$build/providers", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr6", "address": "::1"}], "log_level": "warn"}
JSON
    setsid "$krdmad" --config "$dir/krdmad6.json" > "$dir/krdmad6.out" 2> "$dir/krdmad6.err" &
    groups+=("$!")
    for _ in $(seq 100); do grep -q "ready on" "$dir/krdmad6.out" 2>/dev/null && break; sleep 0.05; done
    grep -q "ready on" "$dir/krdmad6.out" || fail "the krdmad of ::1 did not start: $(cat "$dir/krdmad6.err")"
    export KRDMA_DEVICE=$dir/krdma6
    port=$(test_port)
    start server layer timeout 30 nc -6 -l ::1 "$port"
    spid=$started
    wait_listen "$port"
    "${layer[@]}" timeout 30 nc -6 -N ::1 "$port" < "$payload" 2> "$dir/client.err" || fail "nc's client over ::1 failed"
    wait "$spid" || fail "nc's server over ::1 failed"
    cmp "$payload" "$dir/server.log" || fail "the bytes that came over ::1 are not the bytes sent"
    grep -q "(\[::1\]:$port to \[::1\]:[0-9]*): converted to RDMA" "$dir/server.err" ||
        fail "the server did not convert its IPv6 connection: $(cat "$dir/server.err")"
    ;;
declined)
    # An end that cannot convert (its pinned-memory limit is too small for a stream's buffers) declines with MPA's
    # own frames and both ends stay TCP on the same connection: every byte echoed, the server first, then the client.
    [[ $(id -u) -eq 0 ]] || { echo "declined: needs root (a user with a small RLIMIT_MEMLOCK)"; exit 0; }
    chmod 755 "$dir"
    chmod 666 "$device"
    # As nobody, with an RLIMIT_MEMLOCK of 1 MiB: a stream's buffers (2 MiB per chunk of them) cannot be pinned.
    small=(bash -c 'ulimit -l 1024 && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"' _ "${layer[@]}")
    # The third run: the server declines while the client waits in epoll (its descriptor goes back from the mirror
    # to the TCP socket, its registration with it).
    for side in server client server-epoll; do
        port=$(test_port)
        mode=client
        [[ $side == server-epoll ]] && { side=server; mode=eclient; }
        if [[ $side == server ]]; then srv=("${small[@]}"); cli=("${layer[@]}"); else srv=("${layer[@]}"); cli=("${small[@]}"); fi
        start server srv timeout 30 "$probe" server "$port"
        spid=$started
        wait_listen "$port"
        "${cli[@]}" timeout 30 "$probe" "$mode" "$port" 2000000 > "$dir/client.log" 2> "$dir/client.err" ||
            fail "with the $side short of memory, the client did not get every byte back"
        grep -q "ok 2000000" "$dir/client.log" || fail "with the $side short of memory, the echo was not whole"
        wait "$spid" || fail "with the $side short of memory, the server failed"
        if [[ $side == server ]]; then lacking=server.err other=client.err; else lacking=client.err other=server.err; fi
        grep -q "declined, the connection stays TCP" "$dir/$lacking" ||
            fail "the $side, short of memory, did not say it declined: $(cat "$dir/$lacking")"
        grep -q "peer-declined" "$dir/$other" || fail "the $side's peer did not count a decline: $(cat "$dir/$other")"
        grep -q "is reset" "$dir/server.err" "$dir/client.err" && fail "a connection was reset instead of declined"
    done
    ;;
refused)
    # A non-blocking connect to a closed port fails as TCP's does.
    port=$(test_port)
    got=$("${layer[@]}" timeout 10 "$probe" refused "$port" 2>&1) || fail "the probe failed: $got"
    want=$("${plain[@]}" timeout 10 "$probe" refused "$port" 2>&1)
    [[ $got == "$want" && $got == ECONNREFUSED ]] || fail "through the layer: $got; without: $want"
    ;;
reset|reset_qp)
    # SO_LINGER 0: the server resets the connection; the client's read ends as TCP's does (ECONNRESET), in bounded
    # time, on the byte channel and (reset_qp) on the QPs' path. Both ends through the layer, then both without.
    [[ $case_ == reset_qp ]] && export OPENRDMA_SOCKETS_DIRECT=0
    got="" want=""
    for how in layer plain; do
        declare -n wrap=$how
        port=$(test_port)
        start "server-$how" "$how" timeout 30 "$probe" reset "$port"
        spid=$started
        wait_listen "$port"
        out=$("${wrap[@]}" timeout 20 "$probe" reset-client "$port" 2> "$dir/client-$how.err") ||
            fail "the $how client failed: $out"
        wait "$spid" || fail "the $how server failed"
        [[ $how == layer ]] && got=$out || want=$out
        unset -n wrap
    done
    [[ $got == "$want" && $got == ECONNRESET ]] || fail "through the layer the reset read as '$got'; without: '$want'"
    grep -q "converted to RDMA" "$dir/server-layer.err" || fail "the server converted no connection"
    ;;
iperf3)
    port=$(test_port)
    start server layer timeout 60 iperf3 -s -1 -p "$port"
    wait_listen "$port"
    "${layer[@]}" timeout 60 iperf3 -c 127.0.0.1 -p "$port" -t 1 -J > "$dir/client.json" 2> "$dir/client.log" ||
        fail "iperf3's client failed: $(tail -5 "$dir/client.json")"
    python3 - "$dir/client.json" <<'PY' || fail "iperf3 moved nothing"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if j["end"]["sum_received"]["bytes"] > 0 else 1)
PY
    converted
    ;;
sockperf|sockperf_qp)
    # A ping-pong of 64-byte messages. On one host the bytes move on the connection's byte channel (no QP message);
    # sockperf_qp turns that off: they go as Sends of the QP, inline (from the program's buffer at post time, no send
    # slot).
    [[ $case_ == sockperf_qp ]] && export OPENRDMA_SOCKETS_DIRECT=0
    port=$(test_port)
    start server layer timeout 60 sockperf sr --tcp -i 127.0.0.1 -p "$port"
    wait_listen "$port"
    "${layer[@]}" timeout 60 sockperf pp --tcp -i 127.0.0.1 -p "$port" -t 3 -m 64 > "$dir/client.log" 2>&1 &
    client=$!
    inline=""
    # Until the server's connection shows its path, the client ends, or 30 s pass (the client's own bound is 60 s,
    # so that a stuck run fails here with what it saw, inside CTest's limit).
    deadline=$((SECONDS + 30))
    while (( SECONDS < deadline )) && kill -0 "$client" 2>/dev/null; do
        "$rdmactl" --json sockets > "$dir/rdmactl.json" 2>&1 || true
        inline=$(python3 - "$dir/rdmactl.json" "$case_" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    for c in r["connections"] if r["program"] == "sockperf" else []:
        if c["role"] != "server" or c.get("rx_bytes", 0) == 0 or c.get("tx_bytes", 0) == 0:
            continue
        if sys.argv[2] == "sockperf" and c.get("byte_channel"):
            print(c["tx_messages"], 0)  # nothing of the stream went as a QP message
        elif sys.argv[2] == "sockperf_qp" and c.get("tx_inline", 0) > 0 and not c.get("byte_channel"):
            print(c["tx_inline"], c["tx_messages"])
PY
        )
        [[ -n $inline ]] && break
        sleep 0.1
    done
    wait "$client" || fail "sockperf's client failed: $(tail -5 "$dir/client.log"); the layer saw: $(cat "$dir/rdmactl.json")"
    grep -q "avg-latency" "$dir/client.log" || fail "sockperf printed no latency"
    read -r n m <<< "$inline"
    if [[ $case_ == sockperf ]]; then
        [[ -n $inline ]] || fail "the server's connection never moved bytes on a byte channel: $(cat "$dir/rdmactl.json")"
        (( n == 0 )) || fail "the server sent $n QP messages beside its byte channel (none should carry the stream)"
    else
        [[ -n $inline ]] || fail "the server's answers of 64 bytes never went inline: $(cat "$dir/rdmactl.json")"
        (( n * 10 >= m * 9 )) || fail "only $n of the server's $m messages went inline (64-byte answers all should)"
    fi
    converted
    ;;
kill9)
    # The client killed mid-stream: the server sees the end (or a reset), in bounded time, with a correct prefix.
    port=$(test_port)
    start server layer timeout 60 nc -l 127.0.0.1 "$port"
    spid=$started
    wait_listen "$port"
    start client plain bash -c 'head -c 2000000000 /dev/zero | "${@:1}"' _ "${layer[@]}" nc 127.0.0.1 "$port"
    cpid=$started
    for _ in $(seq 100); do [[ $(stat -c %s "$dir/server.log") -gt 1000000 ]] && break; sleep 0.05; done
    kill -9 -- "-$cpid"
    for _ in $(seq 200); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$spid" 2>/dev/null && fail "the server did not see the client go within 10 s"
    size=$(stat -c %s "$dir/server.log")
    [[ $size -gt 0 ]] || fail "nothing arrived before the kill"
    cmp -n "$size" "$dir/server.log" /dev/zero || fail "the bytes before the kill are not the ones sent"
    converted
    ;;
twohosts_nc|twohosts_iperf3)
    # Two hosts: a network namespace joined to this one by a veth pair, a krdmad in each with an RNIC on its veth
    # address; the connection crosses the veth, so it is converted onto the wire (iWARP over that TCP connection).
    [[ $(id -u) -eq 0 ]] || { echo "network namespaces need root: skipped"; exit 0; }
    sub=$(( $$ % 16384 ))
    net="10.232.$(( sub / 64 ))."
    addr_a="$net$(( sub % 64 * 4 + 1 ))"
    addr_b="$net$(( sub % 64 * 4 + 2 ))"
    ns="orsk$$"
    veth_a="osA$(( $$ % 100000 ))"
    veth_b="osB$(( $$ % 100000 ))"
    trap 'private_krdmad_cleanup; ip netns del "$ns" 2>/dev/null; ip link del "$veth_a" 2>/dev/null; true' EXIT
    ip netns add "$ns"
    ip link add "$veth_a" type veth peer name "$veth_b"
    ip link set "$veth_b" netns "$ns"
    ip addr add "$addr_a/30" dev "$veth_a"
    ip link set "$veth_a" up
    ip netns exec "$ns" sh -c "ip addr add $addr_b/30 dev $veth_b && ip link set $veth_b up && ip link set lo up"
    for h in a b; do
        a_var="addr_$h"
        cat > "$dir/krdmad-$h.json" <<JSON
{"device": "$dir/krdma-$h", "provider_dir": "$build/providers", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr$h", "address": "${!a_var}"}], "log_level": "warn"}
JSON
    done
    start krdmad-a plain "$krdmad" --config "$dir/krdmad-a.json"
    start krdmad-b plain ip netns exec "$ns" "$krdmad" --config "$dir/krdmad-b.json"
    for _ in $(seq 100); do grep -q "ready on" "$dir/krdmad-a.log" && grep -q "ready on" "$dir/krdmad-b.log" && break; sleep 0.05; done
    grep -q "ready on" "$dir/krdmad-b.log" || fail "the namespace's krdmad did not start"
    port=$(test_port)
    if [[ $case_ == twohosts_nc ]]; then
        KRDMA_DEVICE=$dir/krdma-a start server layer timeout 30 nc -l "$addr_a" "$port"
        spid=$started
        wait_listen "$port"
        KRDMA_DEVICE=$dir/krdma-b start client plain ip netns exec "$ns" bash -c \
            'cat "$1" - < <(sleep 1.5) | "${@:2}"' _ "$payload" "${layer[@]}" timeout 30 nc -N "$addr_a" "$port"
        cpid=$started
        expect_decision "$(nc_of "$spid")" rdma wire
        wait "$cpid" || fail "the client in the namespace failed"
        for _ in $(seq 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.05; done
        cmp "$payload" "$dir/server.log" || fail "the server did not receive the payload intact"
    else
        KRDMA_DEVICE=$dir/krdma-a start server layer timeout 60 iperf3 -s -1 -B "$addr_a" -p "$port"
        wait_listen "$port"
        KRDMA_DEVICE=$dir/krdma-b ip netns exec "$ns" "${layer[@]}" timeout 60 iperf3 -c "$addr_a" -p "$port" -t 1 -J \
            > "$dir/client.json" 2> "$dir/client.err" || fail "iperf3's client failed: $(tail -5 "$dir/client.json")"
        python3 - "$dir/client.json" <<'PY' || fail "iperf3 moved nothing"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if j["end"]["sum_received"]["bytes"] > 0 else 1)
PY
    fi
    converted
    ;;
*)
    echo "unknown case $case_"; exit 2 ;;
esac
# The reports of processes that were killed go (rdmactl sockets removes those of processes that are gone).
"$rdmactl" sockets > /dev/null 2>&1 || true
set +e  # the cleanup kills process groups that may have ended already
echo "sockets $case_: passed"
