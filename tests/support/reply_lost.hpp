// Faults that lose a reply: the request runs on the server, its answer
// never reaches the client, and the client resends it.
#pragma once

#include <chrono>
#include <future>
#include <thread>

#include "dlock/client_options.hpp"
#include "redis_server.hpp"

namespace dlock::support {

// Short command timeout, long enough connect timeout that the retry window
// outlasts the pause of with_reply_lost.
inline dlock::ClientOptions cut_options() {
    dlock::ClientOptions o;
    o.command_timeout = std::chrono::milliseconds(300);
    o.connect_timeout = std::chrono::milliseconds(1500);
    o.reconnect_backoff_max = std::chrono::milliseconds(100);
    return o;
}

// Sends what `action` sends while the server is stopped, so the command sits
// in the server's socket buffer; the client times out, drops the connection
// and retries after the server resumes — by which time the first copy has run
// but its reply went to a closed connection.
template <typename Action>
auto with_reply_lost(RedisServer& server, Action action) {
    server.pause();
    auto result = std::async(std::launch::async, action);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    server.resume();
    return result.get();
}

}  // namespace dlock::support
