#!/usr/bin/env bash
# Coverage-guided fuzzing of the iWARP receive path with libFuzzer (needs clang: apt-get install clang).
# The test suite runs the same target as a seeded mutation driver; this script explores further.
#   bash scripts/fuzz.sh [SECONDS]      (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found; install the clang package" >&2; exit 1; }
out=build-fuzz
mkdir -p "$out/corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -DOPENRDMA_LIBFUZZER \
  -DSIW_VECTORS_DIR="\"$(pwd)/tests/vectors/siw\"" \
  -Iproviders/softrnic/iwarp/include -Irnicpi/include -Itests/iwarp \
  tests/iwarp/fuzz_receive.cpp providers/softrnic/iwarp/src/*.cpp -o "$out/fuzz_receive"
# Seed with the siw captures, prefixed by the two mode bytes the target reads first.
for f in tests/vectors/siw/duo*.bin; do
  { printf '\x01\x28'; tail -c +25 "$f"; } > "$out/corpus/$(basename "$f")"
done
"$out/fuzz_receive" "$out/corpus" -max_total_time="$seconds" -max_len=4096
