// Client options for tests that cut servers off or pause them: a connect
// and a command fail within a second, and a reconnect is tried again
// within 100 ms, so that a test sees the client give up and come back
// quickly.
#pragma once

#include <chrono>

#include "dlock/client.hpp"

namespace dlock::test {

inline dlock::ClientOptions quick_options() {
    using namespace std::chrono_literals;
    dlock::ClientOptions o;
    o.connect_timeout = 500ms;
    o.command_timeout = 1s;  // the connections' tick: every 50 ms
    o.reconnect_backoff_max = 100ms;
    return o;
}

}  // namespace dlock::test
