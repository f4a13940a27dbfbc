// A Redis Cluster behind the Topology interface (topology.hpp): commands
// routed and redirected by the ClusterRouter (cluster_router.hpp), channels
// sharded over the masters, and a pool of dedicated connections per master
// for conversations (WAIT counts the writes of its own connection, so the
// write goes to its slot's master on a connection of that master's pool).
// A change of the slot map is the topology's change; pools of masters the
// map no longer names are let go once unused.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "cluster_router.hpp"
#include "topology.hpp"

namespace dlock::detail {

class ClusterTopology final : public Topology, public std::enable_shared_from_this<ClusterTopology> {
public:
    ClusterTopology(asio::io_context& io, ServerAddress address, ClientOptions options);

    void start() override;
    void shutdown() override;
    void on_change(ChangeListener listener) override { router_->on_change(std::move(listener)); }

    std::error_code submit(std::string_view formatted, Completion& done, Clock::time_point deadline) override {
        return router_->submit(formatted, done, deadline);
    }
    std::error_code submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                                Clock::time_point deadline) override {
        return router_->submit_many(formatted, dones, deadline);
    }
    std::error_code submit_to(const ServerAddress& node, std::string_view formatted, Completion& done,
                              Clock::time_point deadline) override {
        return router_->submit_to(node, formatted, done, deadline);
    }
    void submit_dedicated(std::string first, DedicatedConnections::Next next, DedicatedConnections::Done done,
                          Clock::time_point deadline) override;
    std::error_code wait_connected(Clock::time_point deadline) override { return router_->wait_connected(deadline); }
    std::string last_error_detail() const override { return router_->last_error_detail(); }

    std::string server_for_key(std::string_view key) const override;
    std::vector<ServerAddress> masters() const override { return router_->masters(); }
    // Each master has its own script cache: nothing counts as known.
    std::optional<std::uint64_t> script_session() const override { return std::nullopt; }

    bool sharded() const override { return true; }
    std::optional<Home> channel_home(std::string_view channel) const override;
    std::shared_ptr<Connection> connect(const Home& home, ClientOptions options, Connection::Mode mode,
                                        Connection::Hooks hooks) override;
    void refresh_soon() override { router_->refresh_soon(); }

    const std::shared_ptr<ClusterRouter>& cluster_router() const override { return router_; }
    Footprint footprint() override;

private:
    void route_dedicated(std::string first, DedicatedConnections::Next next, DedicatedConnections::Done done,
                         Clock::time_point deadline);
    void retire_unused_node_pools();

    asio::io_context& io_;
    const ClientOptions options_;
    const std::shared_ptr<ClusterRouter> router_;
    std::mutex pools_mutex_;
    std::map<std::string, std::shared_ptr<DedicatedConnections>> pools_;  // by "host:port" of a master
    bool pools_closed_ = false;
    std::atomic<bool> pools_to_retire_{false};  // a pool of a node gone from the map was busy
};

}  // namespace dlock::detail
