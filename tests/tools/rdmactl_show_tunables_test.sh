#!/usr/bin/env bash
# rdmactl show lists each provider's tunables with their values (-v: with their help; --json: always), and a change
# made with rdmactl control is what the next show says: krdmad serves softrnic sr0 on 127.0.0.1 and hwstub hw0 on
# ::1, with tunables set in their attach options. krdmad is stopped whatever happens.
set -euo pipefail
krdmad="$1"
rdmactl="$2"
provider_dir="$3"
dir=$(mktemp -d)
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $1"; [[ -n "${2:-}" ]] && printf '%s\n' "$2"; echo "krdmad said:"; cat "$dir/krdmad.log"; exit 1; }

cat > "$dir/krdmad.json" <<EOF
{"device": "$dir/krdma", "provider_dir": "$provider_dir", "admin_group": "$(id -gn)",
 "modules": ["softrnic_kvp.so", "hwstub_kvp.so"],
 "rnics": [{"name": "sr0", "provider": "softrnic", "address": "127.0.0.1", "options": {"unsent_budget": 1048576}},
           {"name": "hw0", "provider": "hwstub", "address": "::1", "options": {"poll_us": 5, "engines": 2}}],
 "log_level": "warn"}
EOF
"$krdmad" --config "$dir/krdmad.json" > "$dir/krdmad.log" 2>&1 &
pid=$!
ctl() { "$rdmactl" --device "$dir/krdma" "$@" 2>&1; }
for _ in $(seq 200); do ctl list > /dev/null && break; sleep 0.05; done
ctl list > /dev/null || fail "krdmad never served"

# Text: each tunable, its value and whether control changes it.
out=$(ctl show sr0) || fail "show sr0" "$out"
grep -Eq '^  tunables: ' <<< "$out" || fail "no tunables in show sr0" "$out"
grep -Eq '^    unsent_budget +1048576 +settable$' <<< "$out" || fail "unsent_budget not shown" "$out"
grep -Eq '^    siw_nudge +true +settable$' <<< "$out" || fail "siw_nudge not shown" "$out"
grep -q 'TCP_NOTSENT_LOWAT' <<< "$out" && fail "help without -v" "$out"
out=$(ctl show -v sr0) || fail "show -v sr0" "$out"
grep -q '^      bytes the streams of a process .*TCP_NOTSENT_LOWAT' <<< "$out" || fail "no help with -v" "$out"

# JSON: value, settable and help of each.
out=$(ctl --json show sr0) || fail "--json show sr0" "$out"
# (The members of a tunable in the order nlohmann::json keeps them: help, settable, value.)
member() { grep -A3 "^    \"$1\": {" <<< "$out" | grep -Eq "^      \"$2\": $3,?$"; }
member unsent_budget value 1048576 || fail "--json: unsent_budget's value" "$out"
member unsent_budget settable true || fail "--json: unsent_budget's settable" "$out"
member siw_nudge value true || fail "--json: siw_nudge's value" "$out"
member siw_nudge help '".*siw.*"' || fail "--json: siw_nudge's help" "$out"

# A change is what the next show says.
out=$(ctl control sr0 '{"unsent_budget": 0, "siw_nudge": false}') || fail "control sr0" "$out"
out=$(ctl show sr0) || fail "show sr0 after control" "$out"
grep -Eq '^    unsent_budget +0 +settable$' <<< "$out" || fail "unsent_budget not changed" "$out"
grep -Eq '^    siw_nudge +false +settable$' <<< "$out" || fail "siw_nudge not changed" "$out"

# hwstub: the engines' tunables, engines fixed at attach, the others settable at run time.
out=$(ctl show hw0) || fail "show hw0" "$out"
grep -Eq '^    engines +2 +attach only$' <<< "$out" || fail "engines not shown" "$out"
grep -Eq '^    poll_us +5 +settable$' <<< "$out" || fail "poll_us not shown" "$out"
grep -Eq '^    moderation_cqes +8 +settable$' <<< "$out" || fail "moderation_cqes not shown" "$out"
grep -Eq '^    moderation_us +100 +settable$' <<< "$out" || fail "moderation_us not shown" "$out"
out=$(ctl control hw0 '{"poll_us": 0, "moderation_cqes": 4}') || fail "control hw0" "$out"
out=$(ctl control hw0 '{"engines": 4}') && fail "engines changed at run time" "$out"
out=$(ctl control hw0 '{"poll_us": 100001}') && fail "poll_us out of range taken" "$out"
out=$(ctl --json show hw0) || fail "--json show hw0" "$out"
member poll_us value 0 || fail "--json: poll_us not changed" "$out"
member moderation_cqes value 4 || fail "--json: moderation_cqes not changed" "$out"
member engines value 2 || fail "--json: engines changed" "$out"
member engines settable false || fail "--json: engines settable" "$out"
echo "rdmactl show: tunables of softrnic and hwstub shown and changed"
