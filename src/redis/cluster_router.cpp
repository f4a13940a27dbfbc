#include "cluster_router.hpp"

#include <map>

#include "cluster_router_internal.hpp"
#include "command_format.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {

ClusterRouter::ClusterRouter(asio::io_context& io, ServerAddress address, ClientOptions options)
    : io_(io),
      address_(std::move(address)),
      options_(std::move(options)),
      refresh_timer_(io),
      periodic_timer_(io),
      waiting_timer_(io) {}

std::string ClusterRouter::node_key(const std::string& host, std::uint16_t port) {
    return host + ":" + std::to_string(port);
}

ClusterRouter::Node& ClusterRouter::node_locked(const std::string& host, std::uint16_t port) {
    auto key = node_key(host, port);
    auto it = nodes_.find(key);
    if (it != nodes_.end()) return it->second;
    Node node{address_.node(host, port), nullptr};
    node.connection =
        std::make_shared<Connection>(io_, node.address, options_, Connection::Mode::request_reply);
    node.connection->start();
    return nodes_.emplace(std::move(key), std::move(node)).first->second;
}

std::optional<std::uint16_t> ClusterRouter::slot_of(std::string_view formatted) {
    if (auto key = routing_key(formatted)) return key_slot(*key);
    return std::nullopt;
}

std::shared_ptr<Connection> ClusterRouter::route_locked(std::optional<std::uint16_t> slot) {
    if (slot) return slots_[*slot] ? slots_[*slot]->connection : nullptr;
    for (auto* node : slots_)
        if (node) return node->connection;
    return nullptr;
}

void ClusterRouter::start() {
    asio::post(io_, [self = shared_from_this()] {
        self->refresh_now();
        self->schedule_periodic_refresh();
    });
}

void ClusterRouter::shutdown() {
    std::deque<Waiting> waiting;
    std::vector<std::shared_ptr<Connection>> connections;
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
        waiting.swap(waiting_);
        for (auto& [key, node] : nodes_) connections.push_back(node.connection);
    }
    map_changed_.notify_all();
    refresh_timer_.cancel();
    periodic_timer_.cancel();
    asio::post(io_, [self = shared_from_this()] { self->waiting_timer_.cancel(); });
    {
        std::lock_guard lock(mutex_);
        listeners_.clear();
    }
    for (auto& item : waiting) item.done(errc::client_closed, Reply{});
    for (auto& connection : connections) connection->shutdown();
}

std::error_code ClusterRouter::submit(std::string_view formatted, Completion& done, Clock::time_point deadline) {
    const auto slot = slot_of(formatted);
    std::shared_ptr<Connection> connection;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return errc::client_closed;
        if (!map_known_) return wait_for_map_locked({&formatted, 1}, {&done, 1}, deadline);
        connection = route_locked(slot);
    }
    if (!connection) {
        refresh_soon();
        return errc::cluster_down;
    }
    auto routed = std::make_shared<Routed>();
    routed->bytes.assign(formatted);
    routed->done = std::move(done);
    routed->deadline = deadline;
    if (auto ec = send(routed, connection, false)) {
        done = std::move(routed->done);  // the caller fails it
        return ec;
    }
    return {};
}

std::error_code ClusterRouter::submit_to(const ServerAddress& node, std::string_view formatted, Completion& done,
                                         Clock::time_point deadline) {
    std::shared_ptr<Connection> connection;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return errc::client_closed;
        auto it = nodes_.find(node_key(node.host, node.port));
        if (it == nodes_.end()) return errc::cluster_down;
        connection = it->second.connection;
    }
    return connection->submit(formatted, done, deadline);
}

std::error_code ClusterRouter::submit_many(std::span<const std::string_view> formatted,
                                           std::vector<Completion>& dones, Clock::time_point deadline) {
    // Grouped by master, each group in one write; a group that cannot be
    // sent fails alone.
    std::map<Connection*, std::pair<std::shared_ptr<Connection>, std::vector<std::size_t>>> groups;
    std::vector<std::size_t> unrouted;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return errc::client_closed;
        if (!map_known_) return wait_for_map_locked(formatted, dones, deadline);
        for (std::size_t i = 0; i < formatted.size(); ++i) {
            auto connection = route_locked(slot_of(formatted[i]));
            if (!connection) {
                unrouted.push_back(i);
                continue;
            }
            auto& group = groups[connection.get()];
            group.first = connection;
            group.second.push_back(i);
        }
    }
    for (auto& [raw, group] : groups) {
        std::vector<std::shared_ptr<Routed>> routed;
        std::vector<std::string_view> views;
        std::vector<Completion> wrapped;
        for (auto i : group.second) {
            auto r = std::make_shared<Routed>();
            r->bytes.assign(formatted[i]);
            r->done = std::move(dones[i]);
            r->deadline = deadline;
            views.push_back(r->bytes);
            wrapped.push_back([self = shared_from_this(), r](std::error_code ec, Reply&& reply) {
                self->on_reply(r, ec, std::move(reply));
            });
            routed.push_back(std::move(r));
        }
        if (auto ec = group.first->submit_many(views, wrapped, deadline)) {
            // A node let go after the routing above: nothing was sent.
            if (ec == errc::client_closed) ec = errc::not_connected;
            refresh_soon();
            // Taken from the caller: failed later, on the I/O thread, as
            // completions always run.
            asio::post(io_, [self = shared_from_this(), routed = std::move(routed), ec,
                             detail = group.first->last_error_detail()] {
                for (auto& r : routed) self->finish(r, ec, Reply::make_error(detail));
            });
        }
    }
    if (!unrouted.empty()) refresh_soon();
    for (auto i : unrouted) {
        auto done = std::move(dones[i]);
        asio::post(io_, [done = std::move(done)]() mutable { done(errc::cluster_down, Reply{}); });
    }
    return {};
}

std::error_code ClusterRouter::wait_connected(Clock::time_point deadline) {
    std::shared_ptr<Connection> connection;
    {
        std::unique_lock lock(mutex_);
        if (!map_changed_.wait_until(lock, deadline, [&] { return map_known_ || map_failed_ || shut_down_; }))
            return errc::connect_timeout;
        if (shut_down_) return errc::client_closed;
        if (!map_known_) return last_error_;
        connection = route_locked(std::uint16_t{0});
        if (!connection) connection = route_locked(std::nullopt);
    }
    if (!connection) return errc::cluster_down;
    return connection->wait_connected(deadline);
}

std::string ClusterRouter::last_error_detail() const {
    std::lock_guard lock(mutex_);
    return last_error_detail_;
}

std::optional<ServerAddress> ClusterRouter::master_for_slot(std::uint16_t slot) const {
    std::lock_guard lock(mutex_);
    if (slot >= cluster_slots || !slots_[slot]) return std::nullopt;
    return slots_[slot]->address;
}

std::vector<ServerAddress> ClusterRouter::masters() const {
    std::lock_guard lock(mutex_);
    std::vector<ServerAddress> out;
    const Node* last = nullptr;
    for (auto* node : slots_) {
        if (!node || node == last) continue;
        last = node;
        bool seen = false;
        for (auto& address : out) seen |= address.host == node->address.host && address.port == node->address.port;
        if (!seen) out.push_back(node->address);
    }
    return out;
}

ClusterRouter::Counts ClusterRouter::counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
}

std::size_t ClusterRouter::node_count() const {
    std::lock_guard lock(mutex_);
    return nodes_.size();
}

bool ClusterRouter::shut_down() const {
    std::lock_guard lock(mutex_);
    return shut_down_;
}

}  // namespace dlock::detail
