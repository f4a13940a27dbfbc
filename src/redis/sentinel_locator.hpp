// Which server is the master of a Sentinel deployment, for every connection
// of one client (commands, subscriber, dedicated ones).
//
// Every connect attempt of those connections asks locate(): the sentinels
// are asked in turn (SENTINEL get-master-addr-by-name), starting with the
// last one that answered, and the first to name a master wins. Through the
// SentinelMaster target (sentinel_master.hpp) the connection then checks
// with ROLE that the server really is a master, and reports not_master()
// when it is not (a failover under way: sentinels may
// lag; a sentinel partitioned or misconfigured), when it cannot be reached
// or refused the handshake, or when a command was answered READONLY; the
// next locate() asks again, starting with the sentinel after the one that
// named it. A ROLE refusal asks again within the same connect attempt
// (sentinel_master.cpp), up to once per sentinel.
//
// Failovers are learnt fast from the +switch-master channel on one
// sentinel, and also by asking every poll_interval in case that
// subscription is lost. Each change of master (by any of those paths) goes
// to the change listeners: connections to the old master drop at once
// (their commands in flight fail as for any lost connection, never
// resent), and the lock layer revalidates its holds.
//
// The sentinel list starts from the URI and grows with what the sentinels
// report (SENTINEL sentinels, leaving out those the reporter flags as down
// or disconnected), up to ServerAddress::max_endpoints. A learnt sentinel
// that does not answer (refused, silent past the deadline) is dropped once
// the round ends, so that later rounds do not wait for it again; it is
// learnt again when a sentinel reports it up. The URI's sentinels are kept.
//
// Threads: everything runs on the I/O thread, except start().
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "asio.hpp"
#include "dlock/client_options.hpp"
#include "dlock/reply.hpp"
#include "dlock/server_address.hpp"

namespace dlock::detail {

class Connection;

class SentinelLocator : public std::enable_shared_from_this<SentinelLocator> {
public:
    // found runs exactly once, on the I/O thread (maybe before locate returns).
    using Found = std::function<void(std::error_code ec, const ServerAddress& master, const std::string& detail)>;
    // Returns false once it wants no more calls (its connection is gone).
    using ChangeListener = std::function<bool(const ServerAddress& master)>;

    // address: a sentinel URI's (topology sentinel).
    SentinelLocator(asio::io_context& io, ServerAddress address, ClientOptions options);
    ~SentinelLocator();

    // Starts the +switch-master subscription and the polling. Any thread, once.
    void start();
    void shutdown();

    // The master now: asks the sentinels unless a round is under way (then
    // joins it). Fails with the sentinels' common error (auth_failed,
    // connection_refused, ...) when all failed alike, otherwise no_master;
    // detail names each sentinel's answer.
    void locate(Found found);
    // The server at `seen` is not the master (ROLE, READONLY).
    void not_master(const ServerAddress& seen);
    void on_change(ChangeListener listener);
    // How many sentinels are known now: the URI's and those learnt.
    std::size_t sentinel_count() const noexcept { return sentinels_.size(); }

private:
    void start_round();
    void ask(std::size_t tried);
    void on_answer(std::size_t index, std::size_t tried, std::error_code ec, const Reply& reply);
    void finish_round(std::error_code ec, const std::string& detail);
    void set_master(const ServerAddress& master);
    void use_sentinel(std::size_t index);
    void watch_switches();
    void on_switch_message(const Reply& push);
    void poll();
    void learn_sentinels(const Reply& reply);
    ServerAddress sentinel_address(std::size_t index) const;

    asio::io_context& io_;
    const ServerAddress address_;
    const ClientOptions options_;
    // Drops the learnt sentinels that did not answer this round (between rounds).
    void drop_silent();

    struct Known {
        ServerAddress::Endpoint endpoint;
        bool learnt = false;   // from a report, not the URI
        bool silent = false;   // learnt, and did not answer this round
    };
    std::vector<Known> sentinels_;
    std::size_t current_ = 0;                 // the sentinel asked first
    std::size_t round_first_ = 0;             // the one the round under way began with
    std::shared_ptr<Connection> query_;       // to sentinels_[query_index_]
    std::size_t query_index_ = 0;
    std::shared_ptr<Connection> switches_;    // subscriber, to sentinels_[switches_index_]
    std::size_t switches_index_ = 0;
    std::optional<ServerAddress> master_;      // none: not known, or found not to be the master
    std::optional<ServerAddress> last_named_;  // the last master named, to tell a change
    bool round_under_way_ = false;
    std::vector<Found> waiting_;
    std::vector<std::string> round_errors_;
    std::vector<std::error_code> round_codes_;
    std::vector<ChangeListener> listeners_;
    asio::steady_timer poll_timer_;
    unsigned polls_ = 0;
    bool shut_down_ = false;
};

}  // namespace dlock::detail
