# bash completion for dlock(1)
_dlock() {
    local cur prev words cword
    _init_completion || return
    local commands="run hold status wait-free list release demo"
    local global="--url --user --password-file --sentinel-user --sentinel-password-file --connect-timeout --tls-ca --tls-cert --tls-key --quiet --verbose --help --version"
    case $prev in
        --password-file|--sentinel-password-file|--tls-ca|--tls-cert|--tls-key) _filedir; return ;;
        --on-lost) COMPREPLY=($(compgen -W "term kill ignore" -- "$cur")); return ;;
        --url|--user|--connect-timeout|--key|--pattern|--ttl|--wait|--grace|--timeout|--conflict-exit-code|--permits|--holder|-c|--command|--processes|--threads|--bonuses) return ;;
    esac
    local i command=""
    for ((i = 1; i < cword; i++)); do
        [[ ${words[i]} == -- ]] && { _command_offset $((i + 1)); return; }
        [[ " $commands " == *" ${words[i]} "* ]] && { command=${words[i]}; break; }
    done
    local options
    case $command in
        run) options="--key --ttl --wait --no-wait --fair --on-lost --grace --conflict-exit-code --json-events --permits --set-limit --shared --metrics-file -c --command" ;;
        hold) options="--key --ttl --wait --no-wait --fair --conflict-exit-code --json" ;;
        status) options="--key --json --exit-status" ;;
        wait-free) options="--key --timeout" ;;
        list) options="--pattern --json" ;;
        release) options="--key --force --all --holder" ;;
        demo) options="--processes --threads --bonuses --json --metrics --url" ;;
        "") COMPREPLY=($(compgen -W "$commands $global" -- "$cur")); return ;;
    esac
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$options $global" -- "$cur"))
}
complete -F _dlock dlock
