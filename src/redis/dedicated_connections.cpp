#include "dedicated_connections.hpp"

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// The server answered (with an error): the connection is still in step.
bool is_reply_error(std::error_code ec) {
    return ec == errc::server_error || ec == errc::permission_denied || ec == errc::wrong_type ||
           ec == errc::no_script;
}

}  // namespace

DedicatedConnections::DedicatedConnections(asio::io_context& io, ServerAddress address, ClientOptions options)
    : io_(io), address_(std::move(address)), options_(std::move(options)) {}

std::shared_ptr<Connection> DedicatedConnections::take() {
    std::lock_guard lock(mutex_);
    if (closed_) return nullptr;
    if (!idle_.empty()) {
        auto connection = std::move(idle_.back());
        idle_.pop_back();
        return connection;
    }
    auto connection = std::make_shared<Connection>(io_, address_, options_, Connection::Mode::request_reply);
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

void DedicatedConnections::submit(std::vector<std::string> formatted, Done done, Clock::time_point deadline) {
    auto connection = take();
    if (!connection) {
        asio::post(io_, [done = std::move(done)] { done(errc::client_closed, {}); });
        return;
    }
    struct Gather {
        std::vector<Reply> replies;
        std::vector<std::error_code> errors;
        std::size_t left;
        Done done;
    };
    auto gather = std::make_shared<Gather>(
        Gather{std::vector<Reply>(formatted.size()), std::vector<std::error_code>(formatted.size()),
               formatted.size(), std::move(done)});
    std::vector<Completion> dones;
    for (std::size_t i = 0; i < formatted.size(); ++i)
        dones.push_back([this, gather, connection, i](std::error_code ec, Reply&& reply) {
            // Replies arrive in order on the I/O thread: no lock needed.
            gather->replies[i] = std::move(reply);
            gather->errors[i] = ec;
            if (--gather->left > 0) return;
            std::error_code first;
            bool in_step = true;
            for (auto e : gather->errors) {
                if (e && !first) first = e;
                if (e && !is_reply_error(e)) in_step = false;
            }
            if (in_step) give_back(connection);
            else asio::post(io_, [connection] { connection->shutdown(); });
            gather->done(first, std::move(gather->replies));
        });
    std::vector<std::string_view> views(formatted.begin(), formatted.end());
    if (auto ec = connection->submit_many(views, dones, deadline)) {
        asio::post(io_, [connection, done = std::move(gather->done), ec] {
            connection->shutdown();
            done(ec, {});
        });
    }
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
