// The command side of a Redis Cluster client: the slot map, one pipelined
// connection per master, and the redirections.
//
// Each command goes to the master serving the slot of its routing key
// (cluster_slots.hpp). What the cluster answers instead of running it is
// handled here and never reaches the caller:
//   MOVED slot host:port   the slot lives elsewhere now: resent there, and
//                          the map is refreshed;
//   ASK slot host:port     the slot is being migrated and this key has
//                          gone: ASKING and the command go to that node
//                          together, the map is left as it is;
//   TRYAGAIN, CLUSTERDOWN  resent after a pause until the command's
//                          deadline; past it the caller gets the error
//                          (errc::slot_migrating, errc::cluster_down), with
//                          Redis's text. The lock layer sends a call that
//                          got slot_migrating again while its caller waits
//                          (retried_call.hpp).
// None of those ran the command, so resending it is safe. A lost connection
// is an unknown outcome exactly as with one server: the caller is told, and
// nothing is resent here (the lock layer's retries are idempotent). Errors
// reaching a node refresh the map (at most every min_refresh_gap), since a
// failover may have moved its slots; the map is also refreshed every
// ClientOptions::cluster_refresh_interval. When a refresh finds a slot served by another master
// than before (a failover, a migration), the change listeners run.
//
// The map comes from CLUSTER SLOTS, asked of a known master, else of the
// seed nodes in turn. Until the first map is in, commands wait for it (up
// to one connect attempt per seed, and never past their own deadline); when
// no seed answers they fail with what the last one said.
//
// Threads: submit, wait_connected and the queries may be called from any
// thread; everything else runs on the I/O thread.
#pragma once

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/condition.hpp"
#include "cluster_slots.hpp"
#include "connection.hpp"
#include "topology.hpp"

namespace dlock::detail {

class ClusterRouter : public std::enable_shared_from_this<ClusterRouter> {
public:
    // Runs on the I/O thread after a refresh changed the master of some
    // slot. Returns false once it wants no more calls.
    using ChangeListener = std::function<bool()>;

    static constexpr auto min_refresh_gap = min_map_refresh_gap;
    static constexpr int max_redirects = 16;
    static constexpr auto retry_pause = std::chrono::milliseconds(25);

    // address: a cluster URI's (topology cluster): the seed nodes, and the
    // transport and credentials of every node.
    ClusterRouter(asio::io_context& io, ServerAddress address, ClientOptions options);

    void start();  // any thread, once
    void shutdown();

    // As Connection::submit, routed and redirected as above.
    std::error_code submit(std::string_view formatted, Completion& done, Clock::time_point deadline);
    // Several commands; those for one master leave in one write.
    std::error_code submit_many(std::span<const std::string_view> formatted, std::vector<Completion>& dones,
                                Clock::time_point deadline);

    // Until the map is in and the connection for slot 0 is ready, or failed.
    std::error_code wait_connected(Clock::time_point deadline);
    std::string last_error_detail() const;

    // To one node, without routing or redirections (SCAN of each master).
    std::error_code submit_to(const ServerAddress& node, std::string_view formatted, Completion& done,
                              Clock::time_point deadline);
    // The master serving slot, once the map is in.
    std::optional<ServerAddress> master_for_slot(std::uint16_t slot) const;
    // Every master in the map.
    std::vector<ServerAddress> masters() const;
    void on_change(ChangeListener listener);  // any thread
    // What the cluster made this client do, since it started.
    struct Counts {
        std::uint64_t moved = 0;     // MOVED answers followed
        std::uint64_t asked = 0;     // ASK answers followed
        std::uint64_t retried = 0;   // TRYAGAIN and CLUSTERDOWN answers waited out
        std::uint64_t refreshes = 0; // slot maps applied
    };
    Counts counts() const;
    std::size_t node_count() const;  // nodes with a connection now
    // Asks for a new map soon (any thread).
    void refresh_soon();

private:
    bool shut_down() const;
    struct Node {
        ServerAddress address;
        std::shared_ptr<Connection> connection;
    };
    struct Waiting {
        std::string bytes;
        Completion done;
        Clock::time_point deadline;
    };
    struct Routed;

    static std::string node_key(const std::string& host, std::uint16_t port);
    // Under mutex_: the node for host:port, made (and connected) on first use.
    Node& node_locked(const std::string& host, std::uint16_t port);
    // Under mutex_: where a command for slot (none: any master) goes now.
    std::shared_ptr<Connection> route_locked(std::optional<std::uint16_t> slot);
    static std::optional<std::uint16_t> slot_of(std::string_view formatted);
    // Under mutex_, before the first map: queues the commands for it, or
    // fails them at once when the last attempt found none.
    std::error_code wait_for_map_locked(std::span<const std::string_view> formatted, std::span<Completion> dones,
                                        Clock::time_point deadline);

    void expire_waiting();

    std::error_code send(const std::shared_ptr<Routed>& routed, const std::shared_ptr<Connection>& connection,
                         bool asking);
    void on_reply(const std::shared_ptr<Routed>& routed, std::error_code ec, Reply&& reply);
    void retry_later(const std::shared_ptr<Routed>& routed, std::error_code ec, Reply&& reply);
    void finish(const std::shared_ptr<Routed>& routed, std::error_code ec, Reply&& reply);

    void refresh_now();
    void ask_for_map(std::vector<ServerAddress> candidates, std::size_t index, std::string errors);
    bool apply_map(const Reply& reply, const ServerAddress& asked);
    void map_failed(std::error_code ec, const std::string& detail);
    void schedule_periodic_refresh();
    void tell_listeners();

    asio::io_context& io_;
    const ServerAddress address_;
    const ClientOptions options_;

    mutable std::mutex mutex_;
    Condition map_changed_;
    std::map<std::string, Node> nodes_;                 // every node ever routed to, by "host:port"
    std::array<Node*, cluster_slots> slots_{};          // nullptr: no master known for the slot
    bool map_known_ = false;
    bool map_failed_ = false;                           // the last refresh found no map and none is known
    std::error_code last_error_;
    std::string last_error_detail_;
    std::deque<Waiting> waiting_;                       // before the first map
    std::vector<std::shared_ptr<ChangeListener>> listeners_;
    Counts counts_;
    bool shut_down_ = false;

    // I/O thread.
    bool refreshing_ = false;
    bool refresh_again_ = false;
    Clock::time_point last_refresh_{};
    asio::steady_timer refresh_timer_;
    asio::steady_timer periodic_timer_;
    asio::steady_timer waiting_timer_;  // the earliest deadline in waiting_
};

}  // namespace dlock::detail
