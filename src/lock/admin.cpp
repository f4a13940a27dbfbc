// Operator tools: look at a lock, break a lock.
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "lock_keys.hpp"
#include "lock_scripts.hpp"
#include "script_replies.hpp"

namespace dlock {
namespace {

void validate_name(std::string_view name) {
    if (name.empty()) throw Error(errc::invalid_argument, "lock name is empty");
    if (name.size() > max_lock_name_bytes) throw Error(errc::invalid_argument, "lock name is too long");
}

}  // namespace

LockInfo inspect_lock(Client& client, std::string_view name) {
    validate_name(name);
    detail::LockKeys keys(name);
    const auto fence = keys.fence();
    std::string_view k[] = {keys.lock, fence};
    return detail::read_inspect(client.eval(detail::inspect_script(), k, {}));
}

std::optional<std::string> force_release(Client& client, std::string_view name) {
    validate_name(name);
    detail::LockKeys keys(name);
    const auto channel = keys.channel();
    std::string_view k[] = {keys.lock, channel};
    return detail::read_force_release(client.eval(detail::force_release_script(), k, {}));
}

}  // namespace dlock
