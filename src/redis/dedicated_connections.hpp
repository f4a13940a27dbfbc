// Connections of their own, for commands that must not share the
// multiplexed one: WAIT blocks its connection on the server, and it counts
// only the writes made on that same connection, so a write and the WAIT for
// it travel together on a connection no one else uses meanwhile.
//
// A small pool: connections are made on demand, and up to max_idle are kept
// for reuse. Thread-safe. Owned by shared_ptr: a conversation keeps its
// pool alive.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "connection.hpp"

namespace dlock::detail {

class DedicatedConnections : public std::enable_shared_from_this<DedicatedConnections> {
public:
    using Done = std::function<void(std::error_code, std::vector<Reply>&&)>;
    static constexpr std::size_t max_idle = 4;

    DedicatedConnections(asio::io_context& io, ServerAddress address, ClientOptions options,
                         std::shared_ptr<ConnectTarget> target = {});

    // What to send after a reply, on the same connection; nullopt: nothing.
    using Next = std::function<std::optional<std::string>(const Reply&)>;

    // A conversation on a connection of its own: sends `first`, hands each
    // reply to next (if any), which may name the command to send after it,
    // and so on. A command is sent only once the reply before it is in, so a
    // WAIT can depend on what the write before it did. done runs once, on
    // the I/O thread, with every reply in order; ec is the first transport
    // failure (the reply it was waiting for is then missing) or the first
    // error reply (nothing is sent after it). deadline bounds the whole.
    void submit(std::string first, Next next, Done done, Clock::time_point deadline);
    // Closes every connection, failing what is in flight. I/O thread.
    void shutdown();
    // Closes it if no conversation is under way (true), for good. Any thread.
    bool shutdown_if_unused();

private:
    struct Conversation;
    std::shared_ptr<Connection> take();
    void give_back(const std::shared_ptr<Connection>& connection);

    asio::io_context& io_;
    const ServerAddress address_;
    const ClientOptions options_;
    const std::shared_ptr<ConnectTarget> target_;  // null: address_ itself
    std::mutex mutex_;
    std::vector<std::shared_ptr<Connection>> idle_;
    std::vector<std::weak_ptr<Connection>> all_;
    bool closed_ = false;
};

}  // namespace dlock::detail
