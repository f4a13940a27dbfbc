// One server behind the Topology interface (topology.hpp): every command on
// one pipelined connection, every channel on one subscriber connection,
// conversations on one pool of dedicated connections. A Sentinel deployment
// is the same over the master the sentinels name: every connection's target
// is a SentinelMaster (sentinel_master.hpp), and the locator's change of
// master is the topology's change.
#pragma once

#include <memory>
#include <mutex>

#include "connect_target.hpp"
#include "sentinel_locator.hpp"
#include "topology.hpp"

namespace dlock::detail {

class ServerTopology : public Topology {
public:
    // target: where every connection goes (null: address itself).
    ServerTopology(asio::io_context& io, ServerAddress address, ClientOptions options,
                   std::shared_ptr<ConnectTarget> target = {});

    void start() override;
    void shutdown() override;
    void on_change(ChangeListener) override {}  // one server never changes

    std::error_code submit(std::string_view formatted, Completion& done, Clock::time_point deadline) override {
        return commands_->submit(formatted, done, deadline);
    }
    std::error_code submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                                Clock::time_point deadline) override {
        return commands_->submit_many(formatted, dones, deadline);
    }
    std::error_code submit_to(const ServerAddress&, std::string_view formatted, Completion& done,
                              Clock::time_point deadline) override {
        return submit(formatted, done, deadline);
    }
    void submit_dedicated(std::string first, DedicatedConnections::Next next, DedicatedConnections::Done done,
                          Clock::time_point deadline) override;
    std::error_code wait_connected(Clock::time_point deadline) override { return commands_->wait_connected(deadline); }
    std::string last_error_detail() const override { return commands_->last_error_detail(); }

    std::string server_for_key(std::string_view) const override { return commands_->peer(); }
    std::vector<ServerAddress> masters() const override { return {}; }
    std::optional<std::uint64_t> script_session() const override { return commands_->sessions(); }

    bool sharded() const override { return false; }
    std::optional<Home> channel_home(std::string_view) const override { return Home{address_, {}}; }
    std::shared_ptr<Connection> connect(const Home& home, ClientOptions options, Connection::Mode mode,
                                        Connection::Hooks hooks) override;

    const std::shared_ptr<ClusterRouter>& cluster_router() const override;
    Footprint footprint() override { return {}; }

protected:
    asio::io_context& io_;
    const ServerAddress address_;
    const ClientOptions options_;
    const std::shared_ptr<ConnectTarget> target_;

private:
    const std::shared_ptr<Connection> commands_;
    std::mutex dedicated_mutex_;
    std::shared_ptr<DedicatedConnections> dedicated_;  // made on first use
    bool dedicated_closed_ = false;
};

class SentinelTopology final : public ServerTopology {
public:
    SentinelTopology(asio::io_context& io, ServerAddress address, ClientOptions options,
                     std::shared_ptr<SentinelLocator> locator);

    void start() override;
    void shutdown() override;
    void on_change(ChangeListener listener) override;

private:
    const std::shared_ptr<SentinelLocator> locator_;
};

}  // namespace dlock::detail
