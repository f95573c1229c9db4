#!/usr/bin/env bash
# rdmactl's bash completion offers every command `rdmactl --help` lists (so the two cannot drift apart), completes
# a prefix, log levels and a command's own options.
set -euo pipefail
rdmactl="$1"
completion="$2"
# shellcheck source=/dev/null
source "$completion"
complete_line() {  # the words of a command line, the last one being completed
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _rdmactl
    echo "${COMPREPLY[*]}"
}
offered=" $(complete_line rdmactl '') "
listed=$("$rdmactl" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }')
[[ -n "$listed" ]] || { echo "no commands in rdmactl --help"; exit 1; }
for c in $listed; do
    [[ "$offered" == *" $c "* ]] || { echo "completion does not offer '$c' (offered:$offered)"; exit 1; }
done
[[ "$(complete_line rdmactl lis)" == "list" ]] || { echo "'lis' does not complete to list"; exit 1; }
[[ "$(complete_line rdmactl lim)" == "limits" ]] || { echo "'lim' does not complete to limits"; exit 1; }
[[ "$(complete_line rdmactl --log-level d)" == "debug" ]] || { echo "log levels not completed"; exit 1; }
[[ " $(complete_line rdmactl --json attach --pr) " == *" --provider "* ]] || { echo "attach options not completed"; exit 1; }
echo "completion ok: $(echo $listed | wc -w) commands"
