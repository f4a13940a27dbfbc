// dlock/subscription.hpp — one listener on one pub/sub channel.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace dlock {

namespace detail {
class Subscriber;
}

class Subscription {
public:
    enum class Event {
        message,       // a message was published on the channel
        resubscribed,  // the subscriber connection was re-established: messages may have been missed
        subscribed,    // the server confirmed the channel for the first time: from now on no message is missed
                       // (told once, to the listeners the channel has then; active() is true from then on)
    };
    // Runs on the client's I/O thread: it must not block. payload is empty
    // except for Event::message. It should not throw; if it does, the exception
    // is discarded, the other listeners still run, and the subscriber
    // connection is reset (every listener then gets Event::resubscribed).
    using Listener = std::function<void(Event event, std::string_view payload)>;

    Subscription() = default;
    Subscription(Subscription&& other) noexcept;
    Subscription& operator=(Subscription&& other) noexcept;
    // Removes the listener; it is not called after the destructor returns
    // (unless the destructor runs on the I/O thread inside a listener). In a
    // process forked after subscribe() it does nothing: the channel stays
    // subscribed for the parent, whose connection the child must not use.
    ~Subscription();

    // True once the server has confirmed the SUBSCRIBE, so no message
    // published from then on is missed. Waits until deadline at the most,
    // and returns false at once while the channel is refused(). Always false
    // in a forked child.
    bool wait_active(std::chrono::steady_clock::time_point deadline) const;
    bool active() const;
    // The server answered the SUBSCRIBE with an error (NOPERM: an ACL user
    // without rights on the channel): the channel does not listen. It is
    // subscribed again when the subscriber connection reconnects; until
    // then refused() stays true. The client's ClientOptions::on_warning is
    // told of the first refusal, with the server's error.
    bool refused() const;

    const std::string& channel() const noexcept { return channel_; }
    explicit operator bool() const noexcept { return subscriber_ != nullptr; }

    void reset() noexcept;

private:
    friend class detail::Subscriber;
    Subscription(std::shared_ptr<detail::Subscriber> s, std::string channel, unsigned long long id)
        : subscriber_(std::move(s)), channel_(std::move(channel)), id_(id) {}

    std::shared_ptr<detail::Subscriber> subscriber_;
    std::string channel_;
    unsigned long long id_ = 0;
};

}  // namespace dlock
