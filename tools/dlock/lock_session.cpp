#include "lock_session.hpp"

namespace dlock::cli {

std::string holder_of(Client& client, const std::string& key) {
    try {
        LockInfo info = inspect_lock(client, key);
        if (!info.held) return {};
        return "held by " + describe_owner(info) + ", lease " + std::to_string(info.ttl.count()) + " ms left";
    } catch (const Error& e) {
        return std::string("cannot tell who holds it: ") + e.what();
    }
}

std::string permits_of(Client& client, const std::string& key) {
    try {
        const auto info = inspect_semaphore(client, key);
        return std::to_string(info.used) + " of " + std::to_string(info.limit) + " permits held, " +
               std::to_string(info.waiting) + " waiting";
    } catch (const Error& e) {
        return std::string("cannot tell who holds its permits: ") + e.what();
    }
}

void announce_waiting(const GlobalOptions& global, const RunOptions& options, const EventLog& events,
                      const std::string& holder) {
    if (!global.quiet && isatty(STDERR_FILENO))
        complain("waiting for " + options.key + (holder.empty() ? std::string() : ", " + holder));
    events.emit("waiting", "\"holder\": " + json_string(holder));
}

}  // namespace dlock::cli
