// Operator tools: look at a lock, break a lock.
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"
#include "lock_keys.hpp"
#include "lock_scripts.hpp"

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
    Reply reply = client.eval(detail::inspect_script(), k, {});
    if (!reply.is_array() || reply.elements.size() != 5) throw Error(errc::protocol_error, "unexpected inspect reply");
    LockInfo info;
    info.held = !reply.elements[0].is_nil();
    if (info.held) {
        info.owner = reply.elements[0].text;
        info.hold_count = static_cast<unsigned>(reply.elements[1].integer);
        info.ttl = std::chrono::milliseconds(std::max<long long>(reply.elements[2].integer, 0));
        info.fencing_token = static_cast<std::uint64_t>(reply.elements[3].integer);
    }
    info.last_fencing_token = static_cast<std::uint64_t>(reply.elements[4].integer);
    return info;
}

std::optional<std::string> force_release(Client& client, std::string_view name) {
    validate_name(name);
    detail::LockKeys keys(name);
    const auto channel = keys.channel();
    std::string_view k[] = {keys.lock, channel};
    Reply reply = client.eval(detail::force_release_script(), k, {});
    if (reply.is_nil()) return std::nullopt;
    if (!reply.is_array() || reply.elements.empty()) throw Error(errc::protocol_error, "unexpected force-release reply");
    return reply.elements[0].text;
}

}  // namespace dlock
