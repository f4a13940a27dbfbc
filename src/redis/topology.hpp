// Where a client's commands, conversations and channels go: the one
// interface behind which a deployment's shape lives. The client core and
// the subscriber are written once against it and never ask which
// deployment they are in.
//
//   ServerTopology    one server (server_topology.hpp): every command on one
//                     pipelined connection;
//   SentinelTopology  the same over the master the sentinels name
//                     (SentinelMaster as every connection's target); a
//                     change of master is a change of the topology;
//   ClusterTopology   each command to the master of its key's slot
//                     (cluster_topology.hpp, cluster_router.hpp),
//                     channels sharded; a slot moving is a change.
//
// Below this interface a Connection knows only its ConnectTarget
// (connect_target.hpp): where an attempt goes and how the server is admitted.
//
// Threads: submit*, wait_connected and the queries from any thread;
// start() once, before the I/O thread runs; shutdown() on the I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "connection.hpp"
#include "dedicated_connections.hpp"

namespace dlock::detail {

class ClusterRouter;

// How long a channel the server dropped waits before it is placed again: the
// map refresh that the drop asked for has had its chance by then.
inline constexpr auto min_map_refresh_gap = std::chrono::milliseconds(100);

class Topology {
public:
    // Runs on the I/O thread when the server behind some key changed (a
    // Sentinel failover, a slot moved), after the connections to the old
    // one were told. Returns false once it wants no more calls.
    using ChangeListener = std::function<bool()>;

    // The topology address names (its ServerAddress::Topology).
    static std::shared_ptr<Topology> make(asio::io_context& io, const ServerAddress& address,
                                          const ClientOptions& options);
    virtual ~Topology() = default;

    virtual void start() = 0;
    virtual void shutdown() = 0;
    // Listeners registered before the I/O thread runs miss no change.
    virtual void on_change(ChangeListener listener) = 0;

    // As Connection::submit and submit_many, each command to where its key lives.
    virtual std::error_code submit(std::string_view formatted, Completion& done, Clock::time_point deadline) = 0;
    virtual std::error_code submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                                        Clock::time_point deadline) = 0;
    // To one of masters(), or to the one server, without routing.
    virtual std::error_code submit_to(const ServerAddress& node, std::string_view formatted, Completion& done,
                                      Clock::time_point deadline) = 0;
    // A conversation on a connection of its own (dedicated_connections.hpp),
    // with the server of its first command's key. done runs once.
    virtual void submit_dedicated(std::string first, DedicatedConnections::Next next,
                                  DedicatedConnections::Done done, Clock::time_point deadline) = 0;
    // Until the server for the first commands is ready, or failed.
    virtual std::error_code wait_connected(Clock::time_point deadline) = 0;
    virtual std::string last_error_detail() const = 0;

    // Which node: "host:port" of the server for key; empty when not known yet.
    virtual std::string server_for_key(std::string_view key) const = 0;
    // The masters a keyspace walk visits when there are several; empty
    // when one server holds every key.
    virtual std::vector<ServerAddress> masters() const = 0;
    // The session (Connection::sessions()) of the one server that caches
    // every script; none when each master caches its own.
    virtual std::optional<std::uint64_t> script_session() const = 0;

    // Pub/sub. sharded: a channel lives on the master of its slot
    // (SSUBSCRIBE); otherwise every channel is on the one server.
    virtual bool sharded() const = 0;
    struct Home {
        ServerAddress address;
        std::string key;  // one connection per key
    };
    // Where channel is subscribed now; none: not known yet (no slot map).
    virtual std::optional<Home> channel_home(std::string_view channel) const = 0;
    // A connection to home (its target the topology's).
    virtual std::shared_ptr<Connection> connect(const Home& home, ClientOptions options, Connection::Mode mode,
                                                Connection::Hooks hooks) = 0;
    // Asks for a new picture of the deployment soon (a channel was dropped).
    virtual void refresh_soon() {}

    // Cluster only (else null): the slot map, for status output and tests.
    virtual const std::shared_ptr<ClusterRouter>& cluster_router() const = 0;
    // What this topology keeps per node now (diagnostics, tests).
    struct Footprint {
        std::size_t command_nodes = 0;  // nodes with a command connection, in a cluster
        std::size_t node_pools = 0;     // pools of dedicated connections per node, in a cluster
    };
    virtual Footprint footprint() = 0;
};

}  // namespace dlock::detail
