#!/usr/bin/env bash
# Checks the Debian package: its control fields, that it holds every file a
# user needs and nothing else, and that it works unpacked into an empty
# directory (dpkg -x): the dlock command runs, its man page and completions
# are in place, and consumers build against the unpacked tree.
#
#   tests/install/check-package.sh build/default/dlock_VERSION_ARCH.deb
set -euo pipefail
deb=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail() { echo "check-package: $*" >&2; exit 1; }

[ "$(dpkg-deb -f "$deb" Package)" = dlock ] || fail "package name"
dpkg-deb -f "$deb" Depends | grep -q libhiredis || fail "no dependency on hiredis"

files=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' | grep -v '/$')
required=(
    /usr/bin/dlock
    /usr/include/dlock/client.hpp /usr/include/dlock/lock.hpp /usr/include/dlock/error.hpp
    /usr/include/dlock/multi_lock.hpp /usr/include/dlock/deadline.hpp
    /usr/lib/libdlock.so /usr/lib/libdlock.so.0 /usr/lib/libdlock.a
    /usr/lib/cmake/dlock/dlockConfig.cmake /usr/lib/cmake/dlock/dlockConfigVersion.cmake
    /usr/lib/cmake/dlock/dlockTargets.cmake
    /usr/lib/pkgconfig/dlock.pc /usr/lib/pkgconfig/dlock-static.pc
    /usr/share/man/man1/dlock.1
    /usr/share/bash-completion/completions/dlock /usr/share/zsh/vendor-completions/_dlock
    /usr/share/doc/dlock/LICENSE /usr/share/doc/dlock/CHANGELOG.md
)
for f in "${required[@]}"; do
    grep -qxF "$f" <<<"$files" || fail "missing $f"
done
# Nothing else: no test programs, no internal libraries, no build paths.
allowed='^/usr/(bin/dlock|include/dlock/[a-z_]+\.hpp|lib/libdlock\.(so(\.[0-9.]+)?|a)|lib/cmake/dlock/dlock[A-Za-z-]+\.cmake|lib/pkgconfig/dlock(-static)?\.pc|share/man/man1/dlock\.1|share/bash-completion/completions/dlock|share/zsh/vendor-completions/_dlock|share/doc/dlock/(LICENSE|README\.md|CHANGELOG\.md))$'
unexpected=$(grep -vE "$allowed" <<<"$files" || true)
[ -z "$unexpected" ] || fail "unexpected files: $unexpected"
echo "check-package: $(wc -l <<<"$files") files, every one expected"

dpkg -x "$deb" "$root"
"$root/usr/bin/dlock" --version | grep -q '^dlock ' || fail "the unpacked dlock does not run"
grep -q '^\.TH DLOCK 1' "$root/usr/share/man/man1/dlock.1" || fail "man page"
bash -n "$root/usr/share/bash-completion/completions/dlock" || fail "bash completion"
"$here/check-consumers.sh" "$root/usr"
echo "check-package: $(basename "$deb") unpacked, its dlock ran and consumers built against it"
