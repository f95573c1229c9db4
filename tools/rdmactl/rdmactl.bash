# bash completion for rdmactl (installed as share/bash-completion/completions/rdmactl).
_rdmactl() {
    local cur prev words cword
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    local commands="modinfo list resources show attach detach control inject load unload modules consumers stats limits dat-conf sockets"
    local globals="--json --device --timeout --log-level --help --version"
    case "$prev" in
        --device|--provider-dir|--check|--library)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --log-level)
            COMPREPLY=($(compgen -W "error warn info debug" -- "$cur")); return ;;
    esac
    # The command: the first word after rdmactl that is neither an option nor an option's value.
    local i command=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --device|--log-level|--timeout) ((i++)) ;;
            -*) ;;
            *) command="${COMP_WORDS[i]}"; break ;;
        esac
    done
    if [[ -z "$command" ]]; then
        COMPREPLY=($(compgen -W "$commands $globals" -- "$cur"))
        return
    fi
    local options=""
    case "$command" in
        modinfo) options="--provider-dir --mode" ;;
        attach) options="--provider --name --address --netdev --options" ;;
        dat-conf) options="--check --by-address --library" ;;
        sockets) options="--pid" ;;
        inject) options="--clear" ;;
        show) options="--verbose" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$options $globals" -- "$cur"))
    elif [[ "$command" == modinfo || "$command" == load ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _rdmactl rdmactl
