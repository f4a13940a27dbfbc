// The client's single pub/sub connection, shared by every listener.
//
// Channels are reference-counted by their listeners: the first subscribes,
// the last unsubscribes. After a reconnect every channel is subscribed again
// and, once the server confirms, its listeners get Event::resubscribed.
//
// In a forked child, remove() does nothing (the parent keeps the channel),
// and active()/wait_active() are false at once.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "connection.hpp"
#include "dlock/subscription.hpp"

namespace dlock::detail {

class Subscriber : public std::enable_shared_from_this<Subscriber> {
public:
    Subscriber(asio::io_context& io, ServerAddress address, ClientOptions options,
               std::shared_ptr<SentinelLocator> locator = {});

    void start();
    void shutdown();  // I/O thread

    Subscription add(std::string channel, Subscription::Listener listener);
    void remove(const std::string& channel, unsigned long long id);
    bool wait_active(const std::string& channel, Clock::time_point deadline);
    bool active(const std::string& channel);

    void set_io_thread(std::thread::id id) { io_thread_ = id; }

private:
    using ListenerPtr = std::shared_ptr<Subscription::Listener>;
    struct Channel {
        std::map<unsigned long long, ListenerPtr> listeners;
        bool active = false;
        bool announce_resubscribe = false;
    };

    void on_ready();
    // Sends a SUBSCRIBE or UNSUBSCRIBE and counts its acks. Under mutex_.
    void send_counted(std::string_view verb, const std::vector<std::string_view>& channels);
    void on_push(Reply&& reply);
    void notify(const std::string& channel, Subscription::Event event, std::string_view payload, bool only_if_announced);

    const ForkGuard fork_guard_;
    std::shared_ptr<Connection> connection_;
    std::thread::id io_thread_;

    std::mutex mutex_;
    std::condition_variable confirmed_;
    std::unordered_map<std::string, Channel> channels_;
    // SUBSCRIBE/UNSUBSCRIBE commands sent on the current connection whose
    // acknowledgement has not come yet, by channel. Redis acknowledges each
    // once per channel, in order, so a channel is subscribed on the server
    // only when none are outstanding; an ack left over from an earlier
    // unsubscribe-and-subscribe does not count. Reset on reconnect.
    std::unordered_map<std::string, unsigned> outstanding_acks_;
    unsigned long long next_id_ = 1;

    // Held while listeners run, so remove() can promise that its listener is
    // not running and will not run once it returns.
    std::recursive_mutex dispatch_mutex_;
};

}  // namespace dlock::detail
