// Connections of their own, for commands that must not share the
// multiplexed one: WAIT blocks its connection on the server, and it counts
// only the writes made on that same connection, so a write and the WAIT for
// it travel together on a connection no one else uses meanwhile.
//
// A small pool: connections are made on demand, and up to max_idle are kept
// for reuse. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "connection.hpp"

namespace dlock::detail {

class DedicatedConnections {
public:
    using Done = std::function<void(std::error_code, std::vector<Reply>&&)>;
    static constexpr std::size_t max_idle = 4;

    DedicatedConnections(asio::io_context& io, ServerAddress address, ClientOptions options);

    // Sends the commands in one write on a connection of their own. done runs
    // once, on the I/O thread, with every reply in order; ec is the first
    // transport failure (then replies may be missing) or the first error reply.
    void submit(std::vector<std::string> formatted, Done done, Clock::time_point deadline);
    // Closes every connection, failing what is in flight. I/O thread.
    void shutdown();

private:
    std::shared_ptr<Connection> take();
    void give_back(const std::shared_ptr<Connection>& connection);

    asio::io_context& io_;
    const ServerAddress address_;
    const ClientOptions options_;
    std::mutex mutex_;
    std::vector<std::shared_ptr<Connection>> idle_;
    std::vector<std::weak_ptr<Connection>> all_;
    bool closed_ = false;
};

}  // namespace dlock::detail
