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

void announce_waiting(const GlobalOptions& global, const RunOptions& options, const EventLog& events,
                      const std::string& holder) {
    const bool for_people = !global.quiet && isatty(STDERR_FILENO);
    events.report("waiting", "\"holder\": " + json_string(holder),
                  for_people ? "waiting for " + options.key + (holder.empty() ? std::string() : ", " + holder)
                             : std::string());
}

}  // namespace dlock::cli
