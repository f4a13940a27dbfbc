#!/usr/bin/env bash
# Checks the Debian packages (libdlock0, libdlock-dev, dlock, and
# python3-dlock when the Python module was built): lintian finds
# no error in any of them; their control fields and the split (the command
# alone pulls in no -dev package); each holds every file a user needs and
# nothing else; and they install into an empty root (dpkg --root), where the
# dlock command runs, its man page and completions are in place and
# consumers build against the installed tree, the Python module imports
# there, and remove from it leaving
# nothing of theirs behind.
#
#   tests/install/check-package.sh DIR    (DIR holds the .deb files)
set -euo pipefail
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail() { echo "check-package: $*" >&2; exit 1; }
arch=$(dpkg --print-architecture)
multiarch=$(gcc -print-multiarch)
version=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$here/../../CMakeLists.txt")
deb() { echo "$dir/${1}_${version}_$arch.deb"; }
packages=(libdlock0 libdlock-dev dlock)
[ -f "$(deb python3-dlock)" ] && packages+=(python3-dlock)
for p in "${packages[@]}"; do [ -f "$(deb $p)" ] || fail "no $(deb $p)"; done
debs=()
for p in "${packages[@]}"; do debs+=("$(deb $p)"); done

# lintian: no errors; warnings are shown.
lintian_out=$(lintian --tag-display-limit 0 "${debs[@]}" 2>&1 || true)
[ -z "$lintian_out" ] || echo "$lintian_out"
if grep -q '^E: ' <<<"$lintian_out"; then fail "lintian reports errors"; fi
echo "check-package: lintian: no errors, $(grep -c '^W: ' <<<"$lintian_out" || true) warnings"

field() { dpkg-deb -f "$(deb "$1")" "$2"; }
field libdlock0 Depends | grep -q libhiredis || fail "libdlock0 does not depend on hiredis"
field libdlock0 Depends | grep -q -- '-dev' && fail "libdlock0 depends on a -dev package: $(field libdlock0 Depends)"
field dlock Depends | grep -q -- '-dev' && fail "dlock depends on a -dev package: $(field dlock Depends)"
field dlock Recommends | grep -q bash-completion || fail "dlock does not recommend bash-completion"
dev_depends=$(field libdlock-dev Depends)
for d in "libdlock0 (= $version)" libhiredis-dev libssl-dev libasio-dev; do
    grep -qF "$d" <<<"$dev_depends" || fail "libdlock-dev does not depend on $d: $dev_depends"
done

files_of() { dpkg-deb -c "$(deb "$1")" | awk '{print $6}' | sed 's|^\./|/|' | grep -v '/$'; }
# check_files PACKAGE ALLOWED-REGEX REQUIRED...
check_files() {
    local package=$1 allowed=$2 files unexpected
    shift 2
    files=$(files_of "$package")
    for f in "$@" "/usr/share/doc/$package/copyright" "/usr/share/doc/$package/changelog.gz"; do
        grep -qxF "$f" <<<"$files" || fail "$package: missing $f"
    done
    unexpected=$(grep -vE "^(/usr/share/doc/$package/(copyright|changelog\.gz)|$allowed)$" <<<"$files" || true)
    [ -z "$unexpected" ] || fail "$package: unexpected files: $unexpected"
    echo "check-package: $package: $(wc -l <<<"$files") files, every one expected"
}
lib=/usr/lib/$multiarch
check_files libdlock0 "$lib/libdlock\.so\.[0-9.]+" "$lib/libdlock.so.0"
check_files libdlock-dev \
    "/usr/include/dlock/[a-z_]+\.hpp|$lib/libdlock\.(so|a)|$lib/cmake/dlock/dlock[A-Za-z-]+\.cmake|$lib/pkgconfig/dlock(-static)?\.pc|/usr/share/doc/libdlock-dev/(README|CHANGELOG)\.md" \
    /usr/include/dlock/client.hpp /usr/include/dlock/lock.hpp /usr/include/dlock/error.hpp \
    /usr/include/dlock/async.hpp /usr/include/dlock/boost_async.hpp \
    "$lib/libdlock.so" "$lib/libdlock.a" "$lib/cmake/dlock/dlockConfig.cmake" \
    "$lib/cmake/dlock/dlockConfigVersion.cmake" "$lib/cmake/dlock/dlockTargets.cmake" \
    "$lib/pkgconfig/dlock.pc" "$lib/pkgconfig/dlock-static.pc"
check_files dlock \
    "/usr/bin/dlock|/usr/share/man/man1/dlock\.1\.gz|/usr/share/bash-completion/completions/dlock|/usr/share/zsh/vendor-completions/_dlock" \
    /usr/bin/dlock /usr/share/man/man1/dlock.1.gz /usr/share/bash-completion/completions/dlock \
    /usr/share/zsh/vendor-completions/_dlock
if [ -f "$(deb python3-dlock)" ]; then
    field python3-dlock Depends | grep -qF "libdlock0 (= $version)" ||
        fail "python3-dlock does not depend on libdlock0 (= $version): $(field python3-dlock Depends)"
    check_files python3-dlock "/usr/lib/python3/dist-packages/dlock/([a-z_]+\.pyi?|py\.typed|_dlock\.cpython-[0-9]+-[a-z0-9_-]+\.so)" \
        /usr/lib/python3/dist-packages/dlock/__init__.py /usr/lib/python3/dist-packages/dlock/__init__.pyi
fi

# Install into an empty root: a dpkg database and nothing else (their
# dependencies are the host's, hence --force-depends).
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --force-depends --force-script-chrootless -i "${debs[@]}" >"$root/dpkg.log" 2>&1 ||
    fail "dpkg --root -i failed: $(cat "$root/dpkg.log")"
for p in "${packages[@]}"; do
    [ "$(dpkg-query --root="$root" -W -f='${Status}' $p)" = "install ok installed" ] || fail "$p is not installed"
done
"$root/usr/bin/dlock" --version | grep -q '^dlock ' || fail "the installed dlock does not run"
gzip -dc "$root/usr/share/man/man1/dlock.1.gz" | grep -q '^\.TH DLOCK 1' || fail "man page"
bash -n "$root/usr/share/bash-completion/completions/dlock" || fail "bash completion"
grep -qx "prefix=/usr" "$root$lib/pkgconfig/dlock.pc" || fail "dlock.pc does not say prefix=/usr"
"$here/check-consumers.sh" "$root/usr" "$root"
if [ -f "$(deb python3-dlock)" ]; then
    # The installed module, over the installed libdlock.so.0 (the host's
    # loader does not look in the empty root: LD_LIBRARY_PATH does).
    LD_LIBRARY_PATH="$root$lib" PYTHONPATH="$root/usr/lib/python3/dist-packages" python3 -I -B -c '
import sys; sys.path.insert(0, sys.argv[1])
import dlock
assert dlock.__file__.startswith(sys.argv[1]), dlock.__file__
assert issubclass(dlock.LeaseLost, dlock.Error)
print("check-package: the installed python3-dlock imports:", dlock.__file__)
' "$root/usr/lib/python3/dist-packages" || fail "the installed Python module does not import"
fi

dpkg --root="$root" --force-depends --force-script-chrootless -r "${packages[@]}" >"$root/dpkg.log" 2>&1 ||
    fail "dpkg --root -r failed: $(cat "$root/dpkg.log")"
left=$(find "$root/usr" -mindepth 1 2>/dev/null | head -5 || true)  # no usr/ left at all: clean
[ -z "$left" ] || fail "left behind after removal: $left"
echo "check-package: the ${#packages[@]} packages installed into an empty root, its dlock ran, consumers built against it, and removed cleanly"
