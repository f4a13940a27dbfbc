#!/usr/bin/env bash
# dlock's bash completion, driven as bash drives it (COMP_WORDS, COMP_CWORD,
# then the function `complete -p dlock` names) and read from COMPREPLY, as
# compgen produces it: alone (no bash-completion helpers loaded) and, when
# the bash-completion package is there, after its bash_completion script.
# zsh's completion is checked for syntax when zsh is there.
#
#   tests/completion/check-completion.sh SOURCE_DIR
set -uo pipefail
source_dir=$(cd "$1" && pwd)
script=$source_dir/tools/dlock/completion/dlock.bash
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/files"
printf '#!/bin/sh\n' >"$work/bin/dlocktestcmd"
chmod +x "$work/bin/dlocktestcmd"
touch "$work/files/nightly.prom" "$work/files/other.txt"
passed=0
failed=0

# check MODE 'WORDS...' EXPECTED-GREP [UNEXPECTED-GREP]: the reply for the
# last word (an empty last word: write the line with a trailing space).
check() {
    local mode=$1 line=$2 expected=$3 unexpected=${4:-}
    local reply
    reply=$(
        cd "$work/files" || exit 1
        PATH=$work/bin:$PATH
        if [ "$mode" = bash-completion ]; then
            # shellcheck disable=SC1091
            . /usr/share/bash-completion/bash_completion
        fi
        # shellcheck disable=SC1090
        . "$script"
        read -r -a COMP_WORDS <<<"$line"
        [[ $line == *" " ]] && COMP_WORDS+=("")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMP_LINE=$line
        COMP_POINT=${#line}
        function=$(complete -p dlock | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
        "$function" dlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
        printf '%s\n' "${COMPREPLY[@]}"
    )
    if grep -qxE -e "$expected" <<<"$reply" && { [ -z "$unexpected" ] || ! grep -qxE -e "$unexpected" <<<"$reply"; }; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAILED ($mode): '$line' -> [$(tr '\n' ' ' <<<"$reply")], wanted $expected${unexpected:+, not $unexpected}"
    fi
}

modes=(alone)
[ -f /usr/share/bash-completion/bash_completion ] && modes+=(bash-completion)
for mode in "${modes[@]}"; do
    check "$mode" "dlock r" "run"
    check "$mode" "dlock run --no" "--no-wait"
    check "$mode" "dlock run --metrics-" "--metrics-job"
    # After run's --: a command name, as sudo completes it.
    check "$mode" "dlock run nightly -- dlocktest" "dlocktestcmd"
    check "$mode" "dlock run --ttl 10s nightly -- dlocktest" "dlocktestcmd"
    # Its arguments: file names at least.
    check "$mode" "dlock run nightly -- dlocktestcmd nigh" "nightly\.prom"
    # --metrics-file takes a file name, as a word or after '='.
    check "$mode" "dlock run --metrics-file nig" "nightly\.prom"
    check "$mode" "dlock run --metrics-file = nig" "nightly\.prom"
    check "$mode" "dlock --password-file oth" "other\.txt"
    # An option's value is not completed as an option or a command.
    check "$mode" "dlock run --ttl " "" "run|--ttl"
    check "$mode" "dlock run --on-lost k" "kill"
done
if command -v zsh >/dev/null; then
    if zsh -n "$source_dir/tools/dlock/completion/_dlock"; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "FAILED: zsh -n _dlock"
    fi
fi
echo "completion: modes ${modes[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
