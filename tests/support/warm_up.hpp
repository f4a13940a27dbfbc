// Loads every lock script a test needs, so that no NOSCRIPT round trip hides
// behind a delayed reply or shows up in a server's command log.
#pragma once

#include "dlock/client.hpp"

namespace dlock::support {

inline void warm_up(dlock::Client& client) {
    auto lock = client.lock("warm-up");
    lock.lock();
    lock.lock();
    lock.unlock();
    lock.unlock();
}

}  // namespace dlock::support
