# bash completion for dlock(1)
_dlock() {
    local cur prev words cword
    _init_completion || return
    local commands="run hold status wait-free list release demo"
    local global="--url --user --password-file --connect-timeout --tls-ca --tls-cert --tls-key --quiet --verbose --help --version"
    case $prev in
        --password-file|--tls-ca|--tls-cert|--tls-key) _filedir; return ;;
        --on-lost) COMPREPLY=($(compgen -W "term kill ignore" -- "$cur")); return ;;
        --url|--user|--connect-timeout|--ttl|--wait|--grace|--timeout|--conflict-exit-code|-c|--command|--key|--processes|--threads|--bonuses) return ;;
    esac
    local i command=""
    for ((i = 1; i < cword; i++)); do
        [[ ${words[i]} == -- ]] && { _command_offset $((i + 1)); return; }
        [[ " $commands " == *" ${words[i]} "* ]] && { command=${words[i]}; break; }
    done
    local options
    case $command in
        run) options="--ttl --wait --no-wait --on-lost --grace --conflict-exit-code --json-events --permits --shared -c --command --key" ;;
        hold) options="--ttl --wait --no-wait --conflict-exit-code --json" ;;
        status) options="--json --exit-status" ;;
        wait-free) options="--timeout" ;;
        list) options="--json" ;;
        release) options="--force" ;;
        demo) options="--processes --threads --bonuses --json --url" ;;
        "") COMPREPLY=($(compgen -W "$commands $global" -- "$cur")); return ;;
    esac
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$options $global" -- "$cur"))
}
complete -F _dlock dlock
