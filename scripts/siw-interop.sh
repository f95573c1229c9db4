#!/usr/bin/env bash
# softrnic against the Linux kernel's own iWARP (siw) in a qemu guest (../shared/tools/siw-vm): N verified it_rping
# exchanges with softrnic as the MPA initiator against one persistent siw rping server, then a few the other way
# (siw's rping client against it_rping -s). Not part of CI: it needs qemu (installed by the siw-vm script) and about
# a minute per 20 attempts. See docs/siw-interop.md.
#
#   scripts/siw-interop.sh [-n ATTEMPTS] [-r REVERSE_ATTEMPTS] [-k "siw knobs"] [-S SIZE] [-C COUNT] [-f]
#
# -C sets the pings per exchange (default 3): with -S 65535 -C 40, each stream sends several MiB, past the point
# where softrnic re-reads the socket's MSS and frames larger FPDUs (providers/softrnic/README.md).
# -f boots a fresh guest for every initiator attempt (about 10 s each): the first connection to a freshly booted
# siw is the one that stalls most often (qemu has not yet translated siw's code, so siw's window between its MPA
# Reply and taking over the socket is long); a persistent server's later connections rarely hit the window.
# -k builds a siw variant (e.g. "peer_to_peer=true mpa_crc_required=true", "mpa_version=1"). SOFTRNIC_NUDGE=0 in the
# environment attaches softrnic with its siw_nudge option off, to see the stall the nudge prevents. Exit status: 0 when every exchange passed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
vm=${SIWVM_TOOLS:-$root/../shared/tools/siw-vm}
build=${BUILD_DIR:-$root/build}
attempts=20
reverse=3
knobs=""
size=64
count=3
fresh=0
while getopts "n:r:k:S:C:fh" o; do
    case $o in
        n) attempts=$OPTARG ;;
        r) reverse=$OPTARG ;;
        k) knobs=$OPTARG ;;
        S) size=$OPTARG ;;
        C) count=$OPTARG ;;
        f) fresh=1 ;;
        *) sed -n '2,17p' "$0"; exit 2 ;;
    esac
done
[[ -x $vm/run-siw-guest.sh ]] || { echo "siw-interop: no siw-vm tools at $vm (set SIWVM_TOOLS)" >&2; exit 2; }
[[ -x $build/tools/it_rping/it_rping ]] || { echo "siw-interop: build it_rping first ($build)" >&2; exit 2; }

work=$(mktemp -d /tmp/siw-interop.XXXXXX)
# Ports of this run only, so a guest left by another run cannot answer.
port=$((20000 + RANDOM % 20000))
name="interop$$"
guests=()
cleanup() {
    for g in "${guests[@]}"; do
        pidf=/tmp/siwvm/run/$g/qemu.pid
        [[ -f $pidf ]] && kill "$(cat "$pidf")" 2>/dev/null || true
    done
    [[ -n ${server_pid:-} ]] && kill -- "-$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

nudge_option=
[[ ${SOFTRNIC_NUDGE:-on} == 0 || ${SOFTRNIC_NUDGE:-on} == off ]] && nudge_option=', "options": {"siw_nudge": false}'
cat > "$work/embedded.json" <<J
{"provider_dir": "$build/providers", "modules": ["softrnic_kvp.so"],
 "rnics": [{"provider": "softrnic", "name": "sr0", "address": "127.0.0.1"$nudge_option}]}
J
export OPENRDMA_EMBEDDED_CONFIG=$work/embedded.json
knob_args=()
[[ -n $knobs ]] && knob_args=(--siw-knobs "$knobs")

echo "siw-interop: siw knobs '${knobs:-default}', SOFTRNIC_NUDGE=${SOFTRNIC_NUDGE:-on}, $attempts initiator attempts," \
     "$reverse responder attempts, $size-byte pings"
"$vm/run-siw-guest.sh" --build-only "${knob_args[@]}" > "$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; exit 2; }

# softrnic as the initiator against siw's rping server: one persistent server, or (-f) one fresh guest per attempt.
start_server() {  # NAME PORT RPING-OPTIONS
    guests+=("$1")
    "$vm/run-siw-guest.sh" --name "$1" --wait-ready --timeout 600 "${knob_args[@]}" -f "tcp:127.0.0.1:$2-:7174" -- \
        "rping -s $3 -a 10.0.2.15 -p 7174 -V -C $count -S $size" > "$work/$1.log" 2>&1 || { cat "$work/$1.log" >&2; exit 2; }
}
stop_server() {
    local pidf=/tmp/siwvm/run/$1/qemu.pid
    [[ -f $pidf ]] && kill "$(cat "$pidf")" 2>/dev/null || true
}
[[ $fresh -eq 0 ]] && start_server "$name-srv" "$port" -P
stalls=0
failed=0
for i in $(seq "$attempts"); do
    if [[ $fresh -eq 1 ]]; then
        port=$((port + 1))
        start_server "$name-srv$i" "$port" ""
    fi
    # The guest says READY when siw0 is up, a moment before its rping listens: a refused connect is tried again.
    for _ in $(seq 20); do
        start=$(date +%s%N)
        rc=0
        timeout -k 2 12 "$build/tools/it_rping/it_rping" -c -a 127.0.0.1 -p "$port" -C $count -S "$size" -V --timeout 8 \
            > "$work/c$i.log" 2>&1 || rc=$?
        grep -q ECONNREFUSED "$work/c$i.log" || break
        sleep 0.5
    done
    if [[ $rc -eq 0 ]]; then
        echo "  initiator $i: ok ($(( ($(date +%s%N) - start) / 1000000 )) ms)"
    else
        if grep -q "no completion within\|ETIMEDOUT" "$work/c$i.log" || [[ $rc -eq 124 ]]; then
            stalls=$((stalls + 1))
            echo "  initiator $i: STALL (rc $rc)"
        else
            failed=$((failed + 1))
            echo "  initiator $i: FAILED (rc $rc)"
        fi
        sed 's/^/    /' "$work/c$i.log" | tail -5
    fi
    [[ $fresh -eq 1 ]] && stop_server "$name-srv$i"
done

# softrnic as the responder: siw's rping client in a new guest per attempt reaches the host's 127.0.0.1 as 10.0.2.2.
rfailed=0
for i in $(seq "$reverse"); do
    rport=$((port + 100 + i))
    setsid "$build/tools/it_rping/it_rping" -s -a 127.0.0.1 -p "$rport" -C $count -S "$size" -V --timeout 60 \
        > "$work/s$i.log" 2>&1 &
    server_pid=$!
    sleep 0.5
    guests+=("$name-cli$i")
    if "$vm/run-siw-guest.sh" --name "$name-cli$i" --wait --timeout 120 "${knob_args[@]}" -f none -- \
        "rping -c -a 10.0.2.2 -p $rport -V -C $count -S $size" > "$work/g$i.log" 2>&1 &&
        grep -q "CMD-EXIT rc=0" "/tmp/siwvm/run/$name-cli$i/serial.log" && wait "$server_pid"; then
        echo "  responder $i: ok"
    else
        rfailed=$((rfailed + 1))
        echo "  responder $i: FAILED"
        tail -5 "/tmp/siwvm/run/$name-cli$i/serial.log" 2>/dev/null | sed 's/^/    /'
        kill -- "-$server_pid" 2>/dev/null || true
    fi
    server_pid=
done

echo "siw-interop: initiator $((attempts - stalls - failed))/$attempts passed ($stalls stalled, $failed failed);" \
     "responder $((reverse - rfailed))/$reverse passed"
[[ $stalls -eq 0 && $failed -eq 0 && $rfailed -eq 0 ]]
