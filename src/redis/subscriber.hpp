// The client's pub/sub connections, shared by every listener: one per home
// the topology gives a channel (topology.hpp): one connection to one server
// (standalone, or the master a Sentinel deployment names), or in a Redis
// Cluster one per master serving a subscribed channel's slot, with sharded
// pub/sub (SSUBSCRIBE; lock scripts SPUBLISH).
//
// Channels are reference-counted by their listeners: the first subscribes,
// the last unsubscribes. After a reconnect every channel is subscribed again
// and, once the server confirms, its listeners get Event::resubscribed.
// The first confirmation of a channel is announced too (Event::subscribed).
// In a cluster, a channel whose slot moves (a migration, a failover: the
// server pushes SUNSUBSCRIBE, or the slot map changes) is subscribed on its
// new master, and its listeners get Event::resubscribed once it confirms.
//
// In a forked child, remove() does nothing (the parent keeps the channel),
// and active()/wait_active() are false at once.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/condition.hpp"
#include "connection.hpp"
#include "dlock/subscription.hpp"
#include "topology.hpp"

namespace dlock::detail {

class Subscriber : public std::enable_shared_from_this<Subscriber> {
public:
    Subscriber(asio::io_context& io, ClientOptions options, std::shared_ptr<Topology> topology);

    void start();
    // I/O thread. Lets go of everything bound to the I/O context, so
    // Subscriptions may outlive the client: they answer at once from then
    // on (not active, failing) and send nothing.
    void shutdown();

    Subscription add(std::string channel, Subscription::Listener listener);
    void remove(const std::string& channel, unsigned long long id);
    bool wait_active(const std::string& channel, Clock::time_point deadline);
    bool active(const std::string& channel);
    // Whether the connection that carries s's channel has failed its last
    // attempt (refused, timed out, closed) and waits to try again: the
    // channel will not be active soon. False while it connects or is up.
    // True too while the server refuses the channel (Subscription::refused).
    static bool failing(const Subscription& s);
    bool refused(const std::string& channel);

    void set_io_thread(std::thread::id id) { io_thread_ = id; }
    std::size_t shard_count() {
        std::lock_guard lock(mutex_);
        return shards_.size();
    }

    // Moves every channel whose slot another master serves now (sharded),
    // and subscribes again those the server dropped or answered with an
    // error that passes (BUSY, MOVED). I/O thread.
    void replace_channels();

private:
    using ListenerPtr = std::shared_ptr<Subscription::Listener>;
    // One connection, to one server.
    struct Shard {
        std::string key;  // Topology::Home::key
        std::shared_ptr<Connection> connection;
        // SUBSCRIBE/UNSUBSCRIBE commands sent on the current connection whose
        // acknowledgement has not come yet, by channel. Redis acknowledges each
        // once per channel, in order, so a channel is subscribed on the server
        // only when none are outstanding; an ack left over from an earlier
        // unsubscribe-and-subscribe does not count. Reset on reconnect.
        std::unordered_map<std::string, unsigned> outstanding_acks;
        // The (S)SUBSCRIBE/(S)UNSUBSCRIBE commands sent on the current
        // connection and not yet fully answered, oldest first: the server
        // answers a command with one acknowledgement per channel, or with
        // one error (NOPERM), which belongs to the oldest. Reset on reconnect.
        struct Sent {
            bool subscribe;
            std::vector<std::string> channels;
            std::size_t acked = 0;
        };
        std::deque<Sent> sent;
    };
    struct Channel {
        std::map<unsigned long long, ListenerPtr> listeners;
        Shard* shard = nullptr;  // where it is (to be) subscribed; nullptr: dropped, to be placed again
        bool active = false;
        bool announce_resubscribe = false;
        // Until the server first confirms it: its listeners then get
        // Event::subscribed (what was done before may have missed messages).
        bool announce_first = true;
        // The server's error for its last SUBSCRIBE on the current
        // connection (empty: not refused).
        std::string refused;
    };

    // Under mutex_: the shard a channel belongs on now (nullptr: no master
    // known for its slot yet).
    Shard* place_locked(const std::string& channel);
    Shard& shard_locked(const Topology::Home& home);
    void on_ready(Shard& shard);
    // Sends a (S)SUBSCRIBE or (S)UNSUBSCRIBE on shard and counts its acks. Under mutex_.
    void send_counted(Shard& shard, bool subscribe, const std::vector<std::string_view>& channels);
    void on_push(Shard& shard, Reply&& reply);
    // An acknowledgement of the oldest command sent on shard: it is done once
    // each of its channels has one. Under mutex_.
    void acknowledged_locked(Shard& shard);
    // The server answered the oldest command sent on shard with an error
    // (reply). NOPERM refuses its channels for good (until a reconnect);
    // another error (BUSY, MOVED) leaves them to be placed again. Under mutex_.
    struct Refusal {
        std::string warning;      // to give: the client's first refusal
        bool place_again = false;  // schedule_replace()
    };
    Refusal refused_locked(Shard& shard, const Reply& reply);
    // A channel the server dropped on its own (its slot moved): placed again soon.
    void displaced_locked(Channel& entry);
    void schedule_replace();
    void retire_unused_shards_locked();  // sharded, I/O thread
    // A message to the channel's listeners; or, for Event::resubscribed, the
    // announcement the channel owes (resubscribed, first subscribed, or none).
    void notify(const std::string& channel, Subscription::Event event, std::string_view payload, bool only_if_announced);

    const ForkGuard fork_guard_;
    asio::io_context& io_;
    const ClientOptions options_;
    std::shared_ptr<Topology> topology_;  // null once shut down
    const bool sharded_;
    std::thread::id io_thread_;

    std::mutex mutex_;
    Condition confirmed_;
    std::map<std::string, std::unique_ptr<Shard>> shards_;  // by key; sharded: unused ones retired on map changes
    std::unordered_map<std::string, Channel> channels_;
    unsigned long long next_id_ = 1;
    bool started_ = false, shut_down_ = false;
    std::unique_ptr<asio::steady_timer> replace_timer_;  // sharded; I/O thread
    bool replace_scheduled_ = false;
    bool warned_of_refusal_ = false;  // ClientOptions::on_warning is told once

    // Held while listeners run, so remove() can promise that its listener is
    // not running and will not run once it returns.
    std::recursive_mutex dispatch_mutex_;
};

}  // namespace dlock::detail
