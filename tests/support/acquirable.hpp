// How long until a lock can be taken again after a failover: tries a fresh
// lock on name (each try bounded, errors counted as "not yet") until one
// succeeds or 30 s pass.
#pragma once

#include <chrono>
#include <string>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "eventually.hpp"

namespace dlock::support {

// Seconds from `since` until an acquisition of name through client
// succeeded; a negative number when none did within 30 s.
inline double seconds_until_acquirable(dlock::Client& client, const std::string& name,
                                       std::chrono::steady_clock::time_point since) {
    auto probe = client.lock(name);
    const bool ok = eventually(
        [&] {
            try {
                if (!probe.try_lock_for(std::chrono::milliseconds(200))) return false;
                probe.unlock();
                return true;
            } catch (const dlock::Error&) {
                return false;
            }
        },
        std::chrono::seconds(30));
    if (!ok) return -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace dlock::support
