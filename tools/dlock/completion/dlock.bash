# bash completion for dlock(1)
#
# Works on its own: with bash-completion's helpers (the bash-completion
# package, which dlock's Debian package recommends) the command after
# `dlock run ... --` completes as that command would; without them, its
# name completes from PATH and its arguments as file names.
_dlock_files() {
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$1"))
}

_dlock() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev="" cword=$COMP_CWORD
    local -a words=("${COMP_WORDS[@]}")
    ((cword > 0)) && prev=${words[cword - 1]}
    # --option=value: bash splits at '=' (COMP_WORDBREAKS).
    if [[ $cur == = ]]; then
        cur=""
    elif [[ $prev == = ]] && ((cword > 1)); then
        prev=${words[cword - 2]}
    elif [[ $cur == --*=* ]]; then
        prev=${cur%%=*}
        cur=${cur#*=}
    fi

    local commands="run hold status wait-free list release demo"
    local global="--url --user --password-file --sentinel-user --sentinel-password-file --connect-timeout --tls-ca --tls-cert --tls-key --quiet --verbose --help --version"
    local i command="" separator=0
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} == -- ]]; then
            separator=$i
            break
        fi
        [[ -z $command && " $commands " == *" ${words[i]} "* ]] && command=${words[i]}
    done
    # After run's `--`: a command and its arguments, as sudo completes them.
    if ((separator > 0)) && [[ $command == run ]]; then
        if ((cword == separator + 1)); then
            local IFS=$'\n'
            COMPREPLY=($(compgen -c -- "$cur"))
        elif declare -F _command_offset >/dev/null; then
            _command_offset $((separator + 1))
        else
            _dlock_files "$cur"
        fi
        return 0
    fi

    case $prev in
        --password-file|--sentinel-password-file|--tls-ca|--tls-cert|--tls-key|--metrics-file)
            _dlock_files "$cur"; return 0 ;;
        --on-lost) COMPREPLY=($(compgen -W "term kill ignore" -- "$cur")); return 0 ;;
        --url|--user|--connect-timeout|--key|--pattern|--ttl|--wait|-w|--grace|--timeout|--conflict-exit-code|-E|--permits|--holder|-c|--command|--processes|--threads|--bonuses|--metrics-job)
            return 0 ;;
    esac
    local options
    case $command in
        run) options="--key --ttl --wait -w --no-wait -n --fair --on-lost --grace --conflict-exit-code -E --json-events --permits --set-limit --shared -s --metrics-file --metrics-job -c --command" ;;
        hold) options="--key --ttl --wait -w --no-wait -n --fair --conflict-exit-code -E --json" ;;
        status) options="--key --json --exit-status" ;;
        wait-free) options="--key --timeout" ;;
        list) options="--pattern --json" ;;
        release) options="--key --force --all --holder" ;;
        demo) options="--processes --threads --bonuses --json --metrics --url" ;;
        "") COMPREPLY=($(compgen -W "$commands $global" -- "$cur")); return 0 ;;
    esac
    [[ $cur == -* ]] && COMPREPLY=($(compgen -W "$options $global" -- "$cur"))
    return 0
}
complete -F _dlock dlock
