#include "cluster_topology.hpp"

#include <set>

#include "cluster_slots.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

std::string node_text(const ServerAddress& node) { return node.host + ":" + std::to_string(node.port); }

}  // namespace

ClusterTopology::ClusterTopology(asio::io_context& io, ServerAddress address, ClientOptions options)
    : io_(io), options_(options), router_(std::make_shared<ClusterRouter>(io, std::move(address), std::move(options))) {}

void ClusterTopology::start() {
    // First among the listeners: a failover or a migration moved some slot
    // to another master, and the pools of the old ones may go.
    router_->on_change([weak = weak_from_this()] {
        auto self = weak.lock();
        if (self) self->retire_unused_node_pools();
        return self != nullptr;
    });
    router_->start();
}

void ClusterTopology::shutdown() {
    {
        std::lock_guard lock(pools_mutex_);
        pools_closed_ = true;
        for (auto& [key, pool] : pools_) pool->shutdown();
    }
    router_->shutdown();
}

std::string ClusterTopology::server_for_key(std::string_view key) const {
    auto master = router_->master_for_slot(key_slot(key));
    return master ? node_text(*master) : std::string();
}

std::optional<Topology::Home> ClusterTopology::channel_home(std::string_view channel) const {
    auto master = router_->master_for_slot(key_slot(channel));
    if (!master) return std::nullopt;
    return Home{*master, node_text(*master)};
}

std::shared_ptr<Connection> ClusterTopology::connect(const Home& home, ClientOptions options, Connection::Mode mode,
                                                     Connection::Hooks hooks) {
    return std::make_shared<Connection>(io_, home.address, std::move(options), mode, std::move(hooks));
}

// An answer that the write did not run there (MOVED, ASK, TRYAGAIN,
// CLUSTERDOWN: a migration or a failover) sends the whole conversation
// again, to the master the refreshed map names, until the deadline.
void ClusterTopology::submit_dedicated(std::string first, DedicatedConnections::Next next,
                                       DedicatedConnections::Done done, Clock::time_point deadline) {
    auto redirected = [](std::error_code ec, const std::vector<Reply>& replies) {
        // No master known for the slot yet (no map yet, or a failover under
        // way): nothing was sent; wait for the map within the deadline.
        if (ec == errc::cluster_down && replies.empty()) return true;
        if (!ec || replies.size() != 1 || !replies[0].is_error()) return false;
        const std::string_view text = replies[0].text;
        for (std::string_view prefix : {"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"})
            if (text.substr(0, prefix.size()) == prefix) return true;
        return false;
    };
    done = [weak = weak_from_this(), first, next, done = std::move(done), deadline, redirected](
               std::error_code ec, std::vector<Reply>&& replies) mutable {
        auto self = weak.lock();
        // A pool left busy by the last map change may be let go now.
        if (self && self->pools_to_retire_.load(std::memory_order_relaxed)) self->retire_unused_node_pools();
        constexpr auto pause = std::chrono::milliseconds(50);
        if (!self || !redirected(ec, replies) || Clock::now() + pause >= deadline) return done(ec, std::move(replies));
        self->router_->refresh_soon();
        auto timer = std::make_shared<asio::steady_timer>(self->io_, pause);
        timer->async_wait([weak, timer, first = std::move(first), next = std::move(next), done = std::move(done),
                           deadline](std::error_code timer_ec) mutable {
            auto topology = weak.lock();
            if (timer_ec || !topology) return done(errc::client_closed, {});
            topology->submit_dedicated(std::move(first), std::move(next), std::move(done), deadline);
        });
    };
    route_dedicated(std::move(first), std::move(next), std::move(done), deadline);
}

void ClusterTopology::route_dedicated(std::string first, DedicatedConnections::Next next,
                                      DedicatedConnections::Done done, Clock::time_point deadline) {
    std::optional<ServerAddress> master;
    if (auto key = routing_key(first)) master = router_->master_for_slot(key_slot(*key));
    if (!master) {
        router_->refresh_soon();
        return done(errc::cluster_down, {});
    }
    std::lock_guard lock(pools_mutex_);
    if (pools_closed_) return done(errc::client_closed, {});
    auto& pool = pools_[node_text(*master)];
    if (!pool) pool = std::make_shared<DedicatedConnections>(io_, *master, options_);
    // Under the lock, so retire_unused_node_pools cannot close it between
    // (submit never completes synchronously).
    pool->submit(std::move(first), std::move(next), std::move(done), deadline);
}

// The pools of nodes that serve no slot now, once no conversation is on
// them: over a long life a cluster's nodes change address.
void ClusterTopology::retire_unused_node_pools() {
    std::set<std::string> masters;
    for (const auto& master : router_->masters()) masters.insert(node_text(master));
    std::lock_guard lock(pools_mutex_);
    bool busy = false;
    std::erase_if(pools_, [&](auto& entry) {
        if (masters.count(entry.first)) return false;
        if (entry.second->shutdown_if_unused()) return true;
        busy = true;  // a conversation is on it: tried again when one ends
        return false;
    });
    pools_to_retire_.store(busy, std::memory_order_relaxed);
}

Topology::Footprint ClusterTopology::footprint() {
    Footprint footprint;
    footprint.command_nodes = router_->node_count();
    std::lock_guard lock(pools_mutex_);
    footprint.node_pools = pools_.size();
    return footprint;
}

}  // namespace dlock::detail
