#!/usr/bin/env bash
# Builds and runs consumers of an installed dlock as a user would (no C++
# standard set by the consumer; the CMake package carries no -Werror): CMake's find_package with the shared and the
# static library, pkg-config with `dlock` and `dlock-static`. Checks the shared
# library's soname and that it exports dlock's API only (nothing of Asio or
# dlock::detail), and runs each consumer against a private redis-server on a
# unix socket (stopped by its pid).
#
#   tests/install/check-consumers.sh PREFIX     (PREFIX/lib holds the libraries)
set -euo pipefail
prefix=$(cd "$1" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
lib=$prefix/lib
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

export PKG_CONFIG_PATH="$lib/pkgconfig"
for pc in dlock dlock-static; do
    # shellcheck disable=SC2046 # the flags are words
    g++ "$source_dir/examples/consumer/main.cpp" -o "$work/pc-$pc" $(pkg-config --cflags --libs $pc)
    run_consumer "pkg-config $pc" "$work/pc-$pc"
done
