#include "dedicated_connections.hpp"

#include <algorithm>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// The server answered (with an error): the connection is still in step.
bool is_reply_error(std::error_code ec) {
    return ec == errc::server_error || ec == errc::permission_denied || ec == errc::wrong_type ||
           ec == errc::no_script || ec == errc::cluster_down || ec == errc::slot_migrating;
}

}  // namespace

DedicatedConnections::DedicatedConnections(asio::io_context& io, ServerAddress address, ClientOptions options,
                                           std::shared_ptr<ConnectTarget> target)
    : io_(io), address_(std::move(address)), options_(std::move(options)), target_(std::move(target)) {}

std::shared_ptr<Connection> DedicatedConnections::take() {
    std::lock_guard lock(mutex_);
    if (closed_) return nullptr;
    if (!idle_.empty()) {
        auto connection = std::move(idle_.back());
        idle_.pop_back();
        return connection;
    }
    auto connection = std::make_shared<Connection>(io_, address_, options_, Connection::Mode::request_reply,
                                                   Connection::Hooks{}, target_);
    std::erase_if(all_, [](const auto& weak) { return weak.expired(); });
    all_.push_back(connection);
    connection->start();
    return connection;
}

void DedicatedConnections::give_back(const std::shared_ptr<Connection>& connection) {
    {
        std::lock_guard lock(mutex_);
        if (!closed_ && idle_.size() < max_idle) {
            idle_.push_back(connection);
            return;
        }
    }
    asio::post(io_, [connection] { connection->shutdown(); });
}

struct DedicatedConnections::Conversation : std::enable_shared_from_this<Conversation> {
    std::shared_ptr<DedicatedConnections> pool_owner;
    DedicatedConnections& pool;
    std::shared_ptr<Connection> connection;
    Next next;
    Done done;
    Clock::time_point deadline;
    std::vector<Reply> replies;

    Conversation(std::shared_ptr<DedicatedConnections> pool_, std::shared_ptr<Connection> connection_, Next next_,
                 Done done_, Clock::time_point deadline_)
        : pool_owner(std::move(pool_)),
          pool(*pool_owner),
          connection(std::move(connection_)),
          next(std::move(next_)),
          done(std::move(done_)),
          deadline(deadline_) {}

    void send(const std::string& command) {
        Completion on_reply = [self = shared_from_this()](std::error_code ec, Reply&& reply) {
            self->on_reply(ec, std::move(reply));
        };
        if (auto ec = connection->submit(command, on_reply, deadline)) {
            asio::post(pool.io_, [self = shared_from_this(), ec] { self->finish(ec, false); });
        }
    }

    // I/O thread.
    void on_reply(std::error_code ec, Reply&& reply) {
        if (ec && !is_reply_error(ec)) return finish(ec, false);
        replies.push_back(std::move(reply));
        if (ec) return finish(ec, true);
        std::optional<std::string> more;
        if (next) more = next(replies.back());
        if (!more) return finish({}, true);
        send(*more);
    }

    void finish(std::error_code ec, bool in_step) {
        if (in_step) pool.give_back(connection);
        else asio::post(pool.io_, [connection = connection] { connection->shutdown(); });
        done(ec, std::move(replies));
    }
};

void DedicatedConnections::submit(std::string first, Next next, Done done, Clock::time_point deadline) {
    auto connection = take();
    if (!connection) {
        asio::post(io_, [done = std::move(done)] { done(errc::client_closed, {}); });
        return;
    }
    auto conversation =
        std::make_shared<Conversation>(shared_from_this(), std::move(connection), std::move(next), std::move(done),
                                       deadline);
    conversation->send(first);
}

bool DedicatedConnections::shutdown_if_unused() {
    std::vector<std::shared_ptr<Connection>> idle;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return true;
        for (auto& weak : all_) {
            auto connection = weak.lock();
            if (connection && std::find(idle_.begin(), idle_.end(), connection) == idle_.end()) return false;
        }
        closed_ = true;
        idle.swap(idle_);
        all_.clear();
    }
    asio::post(io_, [idle = std::move(idle)] {
        for (auto& connection : idle) connection->shutdown();
    });
    return true;
}

void DedicatedConnections::shutdown() {
    std::vector<std::shared_ptr<Connection>> all;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        idle_.clear();
        for (auto& weak : all_)
            if (auto connection = weak.lock()) all.push_back(std::move(connection));
        all_.clear();
    }
    for (auto& connection : all) connection->shutdown();
}

}  // namespace dlock::detail
