#!/usr/bin/env bash
# No mutable globals in a provider module: every object with static storage the module defines (nm: data and bss
# symbols, function-local statics included) must be one this list explains. Tunables and other state are per RNIC
# (per instance or per open); what is left is constant, per thread, or the one process-wide object a provider's
# design has, named here. A new global fails this test until it is made per RNIC or explained below.
# Usage: module_globals_test.sh MODULE.so...
set -euo pipefail
allowed=(
    # The toolchain's own (C runtime, unwinder, CPU feature probes) and libstdc++'s inline constants.
    '^(DW\.ref\..*|_DYNAMIC|_GLOBAL_OFFSET_TABLE_|__TMC_END__|__cpu_features2|__cpu_model|__dso_handle)$'
    '^(__do_global_dtors_aux_fini_array_entry|__frame_dummy_init_array_entry|__tls_guard|completed\.[0-9]+)$'
    '^std::'
    '^(typeinfo|vtable|guard variable) '
    # The provider kit (rnicpi/cpp/provider.hpp): the module's constant description and verbs table, and the host's
    # upcalls, stored once when the host calls the entry point.
    '^rdma::provider::Module<.*>::(module|verbs|host_)$'
    # iwarp: constant tables, and what is measured once per process and never changes (const, built on first use).
    '^iwarp::(g_piece_copy|kOpcodes)$'
    '^iwarp::term_name\(.*\)::kNames$'
    '^iwarp::\(anonymous namespace\)::hw_tables\(\)::tables$'
    '^iwarp::slow_copy_offsets\(\)::slow$'
    # Constant tables of the providers' options (constexpr arrays of pointers live in relocated data).
    '^(softrnic|hwstub)::kvp::\(anonymous namespace\)::(kLimitKeys|kTunableKeys|kFailableVerbs)$'
    '^hwstub::kvp::\(anonymous namespace\)::parse_faults\(.*\)::kCounts$'
    # softrnic's data path: per-thread scratch (thread_local, holding nothing between calls), and the process's
    # progress thread (one per process by design: the thread, its epoll set and the count of full streams the
    # unsent budget is shared among), made at the first stream and freed at module unload.
    '^softrnic::datapath::\(anonymous namespace\)::t_(batch|stage|realign)$'
    '^softrnic::datapath::\(anonymous namespace\)::instance_(ptr\(\)::p|mutex\(\)::m)$'
)
status=0
for module in "$@"; do
    [[ -f "$module" ]] || { echo "no module $module"; exit 1; }
    symbols=$(nm -C --defined-only "$module" | awk '$2 ~ /^[bBdDuvV]$/ { $1 = ""; $2 = ""; sub(/^  /, ""); print }')
    [[ -n "$symbols" ]] || { echo "$module: nm found no data symbols at all (stripped?)"; exit 1; }
    while IFS= read -r s; do
        ok=0
        for pattern in "${allowed[@]}"; do
            if [[ "$s" =~ $pattern ]]; then ok=1; break; fi
        done
        if (( ! ok )); then
            echo "$(basename "$module"): a global this test does not explain: $s"
            status=1
        fi
    done <<< "$symbols"
done
(( status == 0 )) && echo "no unexplained globals in: $*"
exit $status
