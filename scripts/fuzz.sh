#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (needs clang: apt-get install clang). The test suite runs the same targets
# as seeded drivers; this script explores further.
#   bash scripts/fuzz.sh [SECONDS] [TARGET]      (default 60 seconds, target iwarp)
# Targets:
#   iwarp  the iWARP receive path (tests/iwarp/fuzz_receive.cpp)
#   kal    krdmad's SYSCALL and administration commands through a real device server with test kVP modules
#          (tests/kal/syscall_fuzz.cpp)
#   hwstub hwstub's offload engine receive path: a real engine thread with a QP in RTS on a socket pair, the stream
#          written from the other end (tests/hwstub/fuzz_oe_receive.cpp)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
target=${2:-iwarp}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found; install the clang package" >&2; exit 1; }
out=build-fuzz
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -DOPENRDMA_LIBFUZZER)
case "$target" in
  iwarp)
    mkdir -p "$out/corpus"
    clang++ "${flags[@]}" \
      -DSIW_VECTORS_DIR="\"$(pwd)/tests/vectors/siw\"" \
      -Iiwarp/include -Irnicpi/include -Itests/iwarp \
      tests/iwarp/fuzz_receive.cpp iwarp/src/*.cpp -o "$out/fuzz_receive"
    # Seed with the siw captures, prefixed by the two mode bytes the target reads first.
    for f in tests/vectors/siw/duo*.bin; do
      { printf '\x01\x28'; tail -c +25 "$f"; } > "$out/corpus/$(basename "$f")"
    done
    "$out/fuzz_receive" "$out/corpus" -max_total_time="$seconds" -max_len=4096
    ;;
  kal)
    providers="$(pwd)/$out/providers"
    mkdir -p "$out/corpus-kal" "$providers"
    # The two kVP modules the driver loads (instrumented too, so ASan sees their memory).
    clang -std=c11 -O1 -g -fPIC -shared -fsanitize=address,undefined -Irnicpi/include \
      -DTEST_MODE=RI_MODE_PRIVILEGED -DTEST_NAME='"goodtest"' -DTEST_UVP_LIBRARY='"test_good_uvp.so"' \
      tests/rnicpi/modules/test_module.c -o "$providers/test_good_kvp.so"
    clang++ -std=c++20 -O1 -g -fPIC -shared -fsanitize=address,undefined -Irnicpi/include \
      tests/rnicpi/modules/cpp_kvp.cpp -o "$providers/test_cpp_kvp.so"
    clang++ "${flags[@]}" -DBOOST_DLL_USE_STD_FS -DOPENRDMA_PROVIDER_DIR="\"$providers\"" \
      -DTEST_PROVIDER_DIR="\"$providers\"" \
      -Irnicpi/include -Irnicpi/host/include -Ikal/include -Ikal/device -Ikal/resource -Ikal/memory -Ikal/adapter \
      -Ikal/syscall -Itests/kal \
      tests/kal/syscall_fuzz.cpp kal/syscall/*.cpp kal/device/*.cpp kal/resource/*.cpp kal/memory/*.cpp \
      kal/adapter/*.cpp rnicpi/host/src/*.cpp -ldl -o "$out/fuzz_syscall"
    "$out/fuzz_syscall" "$out/corpus-kal" -max_total_time="$seconds" -max_len=4096 -timeout=30
    ;;
  hwstub)
    mkdir -p "$out/corpus-hwstub"
    clang++ "${flags[@]}" \
      -DSIW_VECTORS_DIR="\"$(pwd)/tests/vectors/siw\"" \
      -Iiwarp/include -Irnicpi/include -Iproviders/hwstub/abi -Iproviders/hwstub/common -Iproviders/hwstub/kvp \
      -Itests/iwarp -Itests/hwstub \
      tests/hwstub/fuzz_oe_receive.cpp providers/hwstub/kvp/offload_engine.cpp providers/hwstub/kvp/dma.cpp \
      iwarp/src/*.cpp -lpthread -o "$out/fuzz_oe_receive"
    # The same seeds as the iwarp target: the siw captures after their MPA frame, behind the two mode bytes (byte 0
    # bit 0 is CRC, which the duo-crc captures need; byte 1 bit 0 closes the stream after the bytes).
    for f in tests/vectors/siw/duo*.bin; do
      case "$f" in *crc*) mode='\x01' ;; *) mode='\x00' ;; esac
      { printf "$mode\x00"; tail -c +25 "$f"; } > "$out/corpus-hwstub/$(basename "$f")"
    done
    # Inputs larger than a socket buffer would not be written whole; every input runs on the engine thread, so give
    # each one a generous timeout.
    "$out/fuzz_oe_receive" "$out/corpus-hwstub" -max_total_time="$seconds" -max_len=4096 -timeout=30
    ;;
  *)
    echo "fuzz.sh: unknown target '$target' (iwarp, kal or hwstub)" >&2
    exit 2
    ;;
esac
