#!/usr/bin/env bash
# Builds and runs consumers of an installed dlock as a user would (no C++
# standard set by the CMake consumer, dlock::dlock brings C++20; the CMake
# package carries no -Werror): CMake's find_package with the shared and the
# static library, pkg-config with `dlock` and `dlock-static` under -std=c++20
# and -std=c++23 (the .pc pins no standard and adds no -I of hiredis), and a
# consumer without -std on an older default is refused with dlock's message. Checks the shared
# library's soname and that it exports dlock's API only (nothing of Asio or
# dlock::detail), and runs each consumer against a private redis-server on a
# unix socket (stopped by its pid).
#
#   tests/install/check-consumers.sh PREFIX [SYSROOT]
# PREFIX/lib or PREFIX/lib/<multiarch> holds the libraries. SYSROOT: the
# tree is unpacked there and its .pc files name the prefix it will have once
# installed (PKG_CONFIG_SYSROOT_DIR).
set -euo pipefail
prefix=$(cd "$1" && pwd)
sysroot=${2:-}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
lib=$prefix/lib
[ -f "$lib/libdlock.so" ] || lib=$prefix/lib/$(gcc -print-multiarch)
work=$(mktemp -d)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-consumers: $*" >&2; exit 1; }

# The shared library: soname with the major version, API-only exports.
soname=$(objdump -p "$lib/libdlock.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libdlock.so.0" ] || fail "soname is '$soname', not libdlock.so.0"
[ -f "$lib/libdlock.a" ] || fail "no static library"
exports=$(nm -D --defined-only -C "$lib/libdlock.so" | awk '{ $1 = ""; $2 = ""; print }')
leaked=$(grep -cE 'asio::|dlock::detail::' <<<"$exports" || true)
[ "$leaked" -eq 0 ] || fail "$leaked internal symbols exported, e.g.: $(grep -E 'asio::|dlock::detail::' <<<"$exports" | head -3)"
grep -q 'dlock::Client::Client' <<<"$exports" || fail "dlock::Client is not exported"
echo "check-consumers: $soname exports $(wc -l <<<"$exports") symbols, none of Asio or dlock::detail"

# The CMake package gives users what they need and nothing of dlock's own build.
if grep -lE 'Werror|dlock_warnings|dlock_objects' "$lib"/cmake/dlock/*.cmake; then
    fail "the CMake package exports dlock's build settings"
fi
grep -q 'cxx_std_20' "$lib/cmake/dlock/dlockTargets.cmake" || fail "dlock::dlock does not carry C++20"

redis-server --port 0 --unixsocket "$work/redis.sock" --save "" --appendonly no --dir "$work" >/dev/null &
server_pid=$!
for _ in $(seq 100); do [ -S "$work/redis.sock" ] && break; sleep 0.05; done
url="unix://$work/redis.sock"

run_consumer() {  # NAME BINARY
    LD_LIBRARY_PATH="$lib" "$2" --check >/dev/null || fail "$1: --check failed"
    LD_LIBRARY_PATH="$lib" "$2" "$url" | grep -q "fencing token" || fail "$1: could not lock"
    echo "check-consumers: $1 built and locked"
}

for kind in shared static; do
    static=OFF
    [ $kind = static ] && static=ON
    cmake -S "$source_dir/examples/consumer" -B "$work/cmake-$kind" -DCMAKE_PREFIX_PATH="$prefix" \
        -DUSE_STATIC=$static >/dev/null
    cmake --build "$work/cmake-$kind" >/dev/null
    run_consumer "CMake find_package ($kind)" "$work/cmake-$kind/consumer"
done
if [ -n "$(readelf -d "$work/cmake-static/consumer" | grep 'libdlock')" ]; then
    fail "the static consumer loads libdlock.so"
fi
readelf -d "$work/cmake-shared/consumer" | grep -q 'libdlock.so.0' || fail "the shared consumer does not load libdlock.so.0"

export PKG_CONFIG_LIBDIR="$lib/pkgconfig"
[ -n "$sysroot" ] && export PKG_CONFIG_SYSROOT_DIR=$sysroot
for pc in dlock dlock-static; do
    cflags=$(pkg-config --cflags $pc)
    case " $cflags " in
        *" -std="*) fail "pkg-config --cflags $pc pins a standard: $cflags" ;;
        *hiredis*) fail "pkg-config --cflags $pc leaks hiredis's include path: $cflags" ;;
        *"/../"*) fail "pkg-config --cflags $pc is not normalised: $cflags" ;;
    esac
    for std in c++20 c++23; do
        # shellcheck disable=SC2046 # the flags are words
        g++ -std=$std "$source_dir/examples/consumer/main.cpp" -o "$work/pc-$pc-$std" $(pkg-config --cflags --libs $pc)
        run_consumer "pkg-config $pc -std=$std" "$work/pc-$pc-$std"
    done
done
# An older standard is refused by the headers with what to do, not with
# an error deep inside them.
# shellcheck disable=SC2046
if g++ -std=c++17 -fsyntax-only "$source_dir/examples/consumer/main.cpp" $(pkg-config --cflags dlock) \
        2>"$work/cxx17.log"; then
    fail "a -std=c++17 consumer compiled"
fi
grep -q "dlock needs C++20 or later" "$work/cxx17.log" || fail "-std=c++17: no word of the standard needed: $(head -3 "$work/cxx17.log")"
echo "check-consumers: -std=c++17 refused with dlock's message"
