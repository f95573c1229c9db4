#!/usr/bin/env bash
# The README's test command: installs the dependencies, builds, and runs the whole test suite, first in the normal
# build and then in an ASan+UBSan build. .ci/run calls exactly this script.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-deps.sh

jobs=${JOBS:-2}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 600

# Memory and undefined-behaviour errors fail the run. The install test needs no second run.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOPENRDMA_SANITIZE=address \
  -DOPENRDMA_BUILD_DOCS=OFF -DOPENRDMA_BUILD_BENCH=OFF
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 600 -E '^install\.'
