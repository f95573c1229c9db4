#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (needs clang: apt-get install clang). The test suite runs the same targets
# as seeded drivers and replays the corpus kept in tests/fuzz/corpus/<target>/; this script explores further.
#   bash scripts/fuzz.sh [SECONDS] [TARGET] [--merge|--minimise] [--build-only] [-- LIBFUZZER_OPTION...]
# (default 60 seconds, target iwarp). Targets:
#   iwarp  the iWARP receive path (tests/iwarp/fuzz_receive.cpp)
#   kal    krdmad's SYSCALL and administration commands through a real device server with test kVP modules
#          (tests/kal/syscall_fuzz.cpp)
#   mpa    MPA connection setup of the kAL's LLP management (kal/llp/mpa_session), both roles, on socket pairs
#          (tests/kal/mpa_fuzz.cpp)
#   hwstub hwstub's offload engine receive path: a real engine thread with a QP in RTS on a socket pair, the stream
#          written from the other end (tests/hwstub/fuzz_oe_receive.cpp)
# The run starts from tests/fuzz/corpus/TARGET (read only) and build-fuzz/corpus-TARGET, where libFuzzer keeps what it
# finds. --merge then adds to tests/fuzz/corpus/TARGET the inputs of that run that reach edges the kept corpus does not
# (libFuzzer -merge=1 on edge coverage only, so the kept corpus stays small); review and commit them. --minimise
# instead rebuilds the kept corpus from scratch: the fewest inputs of the kept corpus and the run that reach every edge
# either reaches (the same merge into an empty directory), replacing tests/fuzz/corpus/TARGET. CTest replays each kept
# corpus as fuzz.corpus.TARGET (the seeded driver given the directory; see tests/fuzz/replay.hpp). Crash inputs go
# to build-fuzz/crashes-TARGET/; replay one with the seeded driver (e.g. build/tests/kal/kal_mpa_fuzz FILE) or with
# the libFuzzer binary (build-fuzz/fuzz_mpa FILE). --build-only builds the libFuzzer binary and stops. Options after
# -- go to libFuzzer (e.g. -runs=10000000 -print_final_stats=1).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
target=iwarp
merge=0
build_only=0
positional=()
extra=()
tuning=()  # libFuzzer options a target needs to run at its pace (set per target below; -- options come after)
while (($# > 0)); do
  case "$1" in
    --merge) merge=1 ;;
    --minimise) merge=2 ;;
    --build-only) build_only=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; exit 2 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
((${#positional[@]} > 0)) && seconds=${positional[0]}
((${#positional[@]} > 1)) && target=${positional[1]}
((${#positional[@]} > 2)) && { echo "fuzz.sh: too many arguments" >&2; exit 2; }

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found; install the clang package" >&2; exit 1; }
out=build-fuzz
# shellcheck disable=SC2054  # the commas belong to -fsanitize=
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -DOPENRDMA_LIBFUZZER -Itests/fuzz)
kept="tests/fuzz/corpus/$target"
work="$out/corpus-$target"
crashes="$out/crashes-$target"

# True when $1 is missing or older than this script or any file under the directories that follow.
stale() {
  local bin=$1; shift
  [[ ! -x "$bin" ]] || [[ -n "$(find "$@" scripts/fuzz.sh -newer "$bin" -type f -print -quit)" ]]
}

case "$target" in
  iwarp)
    bin="$out/fuzz_receive"
    max_len=4096
    timeout=10
    mkdir -p "$out"
    if stale "$bin" iwarp rnicpi/include tests/iwarp tests/fuzz/replay.hpp; then
      echo "fuzz.sh: building $bin"
      clang++ "${flags[@]}" \
        -DSIW_VECTORS_DIR="\"$(pwd)/tests/vectors/siw\"" \
        -Iiwarp/include -Irnicpi/include -Itests/iwarp \
        tests/iwarp/fuzz_receive.cpp iwarp/src/*.cpp -o "$bin"
    fi
    # Seed with the siw captures, prefixed by the two mode bytes the target reads first.
    mkdir -p "$work"
    for f in tests/vectors/siw/duo*.bin; do
      { printf '\x01\x28'; tail -c +25 "$f"; } > "$work/$(basename "$f")"
    done
    ;;
  kal)
    bin="$out/fuzz_syscall"
    max_len=4096
    timeout=30
    providers="$(pwd)/$out/providers"
    mkdir -p "$providers"
    # The two kVP modules the driver loads (instrumented too, so ASan sees their memory).
    if stale "$providers/test_good_kvp.so" tests/rnicpi/modules rnicpi/include; then
      clang -std=c11 -O1 -g -fPIC -shared -fsanitize=address,undefined -Irnicpi/include \
        -DTEST_MODE=RI_MODE_PRIVILEGED -DTEST_NAME='"goodtest"' -DTEST_UVP_LIBRARY='"test_good_uvp.so"' \
        tests/rnicpi/modules/test_module.c -o "$providers/test_good_kvp.so"
    fi
    if stale "$providers/test_cpp_kvp.so" tests/rnicpi/modules rnicpi/include; then
      clang++ -std=c++20 -O1 -g -fPIC -shared -fsanitize=address,undefined -Irnicpi/include \
        tests/rnicpi/modules/cpp_kvp.cpp -o "$providers/test_cpp_kvp.so"
    fi
    # What the kal_syscall library links (kal/CMakeLists.txt): the device server and protocol, resources, memory,
    # adapters, LLP management (MPA over iwarp_mpa, routes over libnl), endpoints, and the RNIC-PI host.
    if stale "$bin" krdma kal iwarp rnicpi tests/kal tests/fuzz/replay.hpp; then
      echo "fuzz.sh: building $bin"
      # shellcheck disable=SC2046
      clang++ "${flags[@]}" -DBOOST_DLL_USE_STD_FS -DOPENRDMA_PROVIDER_DIR="\"$providers\"" \
        -DTEST_PROVIDER_DIR="\"$providers\"" \
        -Irnicpi/include -Irnicpi/host/include -Ikrdma/include -Ikal/include -Ikal/device -Ikal/resource -Ikal/memory -Ikal/adapter \
        -Ikal/syscall -Ikal/llp -Ikal/endpoint -Ikal/event -Iiwarp/include -Itests/kal \
        $(pkg-config --cflags libnl-3.0 libnl-route-3.0) \
        tests/kal/syscall_fuzz.cpp krdma/src/*.cpp kal/syscall/*.cpp kal/device/*.cpp kal/resource/*.cpp kal/memory/*.cpp \
        kal/adapter/*.cpp kal/llp/*.cpp kal/endpoint/*.cpp kal/event/*.cpp iwarp/src/*.cpp rnicpi/host/src/*.cpp \
        -ldl -lpthread $(pkg-config --libs libnl-3.0 libnl-route-3.0) -o "$bin"
    fi
    mkdir -p "$work"
    # Entropic scheduling keeps every feature seen fewer than 255 times as "rare" and looks each one up per input:
    # with this target's ~28,000 features that bookkeeping cost more than the input itself (337 inputs/s against
    # 578 with the threshold at 8, on the same corpus). At 8 the rarest features still steer the schedule.
    tuning=(-entropic_feature_frequency_threshold=8)
    ;;
  mpa)
    bin="$out/fuzz_mpa"
    max_len=1024   # a frame is at most 532 bytes; the rest is the stream that must stay unread
    timeout=10
    mkdir -p "$out"
    if stale "$bin" kal/llp krdma/include krdma/src/net_addr.cpp iwarp rnicpi/include tests/kal/mpa_fuzz.cpp \
        tests/fuzz/replay.hpp; then
      echo "fuzz.sh: building $bin"
      clang++ "${flags[@]}" -Ikal/llp -Ikrdma/include -Iiwarp/include -Irnicpi/include \
        tests/kal/mpa_fuzz.cpp kal/llp/mpa_session.cpp krdma/src/net_addr.cpp \
        iwarp/src/crc32c.cpp iwarp/src/framing.cpp iwarp/src/mpa.cpp iwarp/src/wire.cpp -o "$bin"
    fi
    mkdir -p "$work"
    ;;
  hwstub)
    bin="$out/fuzz_oe_receive"
    max_len=4096
    timeout=30
    mkdir -p "$out"
    if stale "$bin" iwarp rnicpi/include providers/hwstub tests/iwarp tests/hwstub tests/fuzz/replay.hpp; then
      echo "fuzz.sh: building $bin"
      clang++ "${flags[@]}" \
        -DSIW_VECTORS_DIR="\"$(pwd)/tests/vectors/siw\"" \
        -Iiwarp/include -Irnicpi/include -Iproviders/hwstub/abi -Iproviders/hwstub/common -Iproviders/hwstub/kvp \
        -Itests/iwarp -Itests/hwstub \
        tests/hwstub/fuzz_oe_receive.cpp providers/hwstub/kvp/offload_engine.cpp providers/hwstub/kvp/dma.cpp \
        iwarp/src/*.cpp -lpthread -o "$bin"
    fi
    # The same seeds as the iwarp target: the siw captures after their MPA frame, behind the two mode bytes (byte 0
    # bit 0 is CRC, which the duo-crc captures need; byte 1 bit 0 closes the stream after the bytes).
    mkdir -p "$work"
    for f in tests/vectors/siw/duo*.bin; do
      case "$f" in *crc*) mode='\x01' ;; *) mode='\x00' ;; esac
      # shellcheck disable=SC2059  # the mode byte is a printf escape
      { printf "$mode\x00"; tail -c +25 "$f"; } > "$work/$(basename "$f")"
    done
    # Every input runs on the engine thread (inputs larger than a socket buffer would not be written whole), so
    # each one gets a generous timeout.
    ;;
  *)
    echo "fuzz.sh: unknown target '$target' (iwarp, kal, mpa or hwstub)" >&2
    exit 2
    ;;
esac
((build_only)) && { echo "fuzz.sh: $bin is built"; exit 0; }

mkdir -p "$kept" "$crashes"
"$bin" "$work" "$kept" -max_total_time="$seconds" -max_len="$max_len" -timeout="$timeout" \
  -artifact_prefix="$crashes/" -print_final_stats=1 ${tuning[@]+"${tuning[@]}"} ${extra[@]+"${extra[@]}"}

if ((merge == 2)); then
  before=$(find "$kept" -type f | wc -l)
  fresh=$(mktemp -d "$out/minimise-$target.XXXXXX")
  "$bin" -merge=1 -use_counters=0 -use_value_profile=0 -max_len="$max_len" -timeout="$timeout" \
    "$fresh" "$kept" "$work" 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files" || true
  if [[ -n "$(find "$fresh" -type f -print -quit)" ]]; then
    find "$kept" -type f -delete
    mv "$fresh"/* "$kept"/
  fi
  rmdir "$fresh" 2>/dev/null || rm -rf "$fresh"
  after=$(find "$kept" -type f | wc -l)
  echo "fuzz.sh: $kept: $before inputs before, $after after minimising ($(du -sh --apparent-size "$kept" | cut -f1)B)"
elif ((merge)); then
  before=$(find "$kept" -type f | wc -l)
  # Edge coverage only (no hit counts, no value profile): the kept corpus is the few inputs that reach some edge
  # nothing else reaches, not every input that ran a loop once more.
  "$bin" -merge=1 -use_counters=0 -use_value_profile=0 -max_len="$max_len" -timeout="$timeout" \
    "$kept" "$work" 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files" || true
  after=$(find "$kept" -type f | wc -l)
  echo "fuzz.sh: $kept: $before inputs before the merge, $after after ($(du -sh --apparent-size "$kept" | cut -f1)B)"
fi
