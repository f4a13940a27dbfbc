// The Redis keys of one lock. All carry the hash tag {name} so that they
// live in one cluster slot and one script may touch them together.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

struct LockKeys {
    explicit LockKeys(std::string_view name) : lock("dlock:{" + std::string(name) + "}") {}

    // hash {owner, count, seq, token}, PEXPIRE = lease
    std::string lock;
    // hash {token: last fencing token, released: last final release}; never expires.
    // Made when needed: a held lock keeps only one key name in memory.
    std::string fence() const { return lock + ":fence"; }
    // a message on every full release
    std::string channel() const { return lock + ":ch"; }
};

}  // namespace dlock::detail
