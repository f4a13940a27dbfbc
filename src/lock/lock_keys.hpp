// The Redis keys of one lock. All carry the hash tag {name} so that they
// live in one cluster slot and one script may touch them together.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

struct LockKeys {
    explicit LockKeys(std::string_view name)
        : lock("dlock:{" + std::string(name) + "}"), fence(lock + ":fence"), channel(lock + ":ch") {}

    std::string lock;     // hash {owner, count, seq, token}, PEXPIRE = lease
    std::string fence;    // hash {token: last fencing token, released: last final release}; never expires
    std::string channel;  // a message on every full release
};

}  // namespace dlock::detail
