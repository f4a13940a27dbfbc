#include "subscriber.hpp"

#include <vector>

#include "command_format.hpp"

namespace dlock::detail {
namespace {

// SUBSCRIBE takes many channels at once; after a reconnect with thousands of
// waiting locks, send them in commands of this many.
constexpr std::size_t channels_per_command = 1000;

void append_channel_command(std::string& out, std::string_view verb, const std::vector<std::string_view>& channels) {
    for (std::size_t i = 0; i < channels.size(); i += channels_per_command) {
        std::vector<std::string_view> args{verb};
        auto end = std::min(channels.size(), i + channels_per_command);
        args.insert(args.end(), channels.begin() + static_cast<long>(i), channels.begin() + static_cast<long>(end));
        append_command(out, args);
    }
}

}  // namespace

Subscriber::Subscriber(asio::io_context& io, ServerAddress address, ClientOptions options,
                       std::shared_ptr<SentinelLocator> locator) {
    Connection::Hooks hooks;
    // The hooks run on the I/O thread while this object is alive: the client
    // core shuts the connection down before letting go of the subscriber.
    hooks.on_ready = [this] { on_ready(); };
    hooks.on_push = [this](Reply&& reply) { on_push(std::move(reply)); };
    options.client_name = options.client_name.empty() ? std::string() : options.client_name + ":sub";
    connection_ = std::make_shared<Connection>(io, std::move(address), std::move(options),
                                               Connection::Mode::subscriber, std::move(hooks), std::move(locator));
}

void Subscriber::start() { connection_->start(); }

void Subscriber::shutdown() { connection_->shutdown(); }

void Subscriber::send_counted(std::string_view verb, const std::vector<std::string_view>& channels) {
    std::string bytes;
    append_channel_command(bytes, verb, channels);
    // Not ready: nothing is sent, and on_ready subscribes every channel.
    if (!connection_->send_if_ready(bytes)) return;
    for (auto channel : channels) ++outstanding_acks_[std::string(channel)];
}

Subscription Subscriber::add(std::string channel, Subscription::Listener listener) {
    unsigned long long id;
    {
        std::lock_guard lock(mutex_);
        id = next_id_++;
        auto& entry = channels_[channel];
        bool first = entry.listeners.empty();
        entry.listeners.emplace(id, std::make_shared<Subscription::Listener>(std::move(listener)));
        if (first) send_counted("SUBSCRIBE", {channel});
    }
    return Subscription(shared_from_this(), std::move(channel), id);
}

void Subscriber::remove(const std::string& channel, unsigned long long id) {
    // In a child the channel stays subscribed for the parent: no UNSUBSCRIBE
    // on its socket, and no lock its I/O thread may have held at fork().
    if (fork_guard_.forked()) return;
    std::unique_lock<std::recursive_mutex> dispatch(dispatch_mutex_, std::defer_lock);
    if (std::this_thread::get_id() != io_thread_) dispatch.lock();
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    it->second.listeners.erase(id);
    if (it->second.listeners.empty()) {
        channels_.erase(it);
        send_counted("UNSUBSCRIBE", {channel});
    }
}

bool Subscriber::wait_active(const std::string& channel, Clock::time_point deadline) {
    if (fork_guard_.forked()) return false;  // only the parent's I/O thread could confirm it
    std::unique_lock lock(mutex_);
    return confirmed_.wait_until(lock, deadline, [&] {
        auto it = channels_.find(channel);
        return it != channels_.end() && it->second.active;
    });
}

bool Subscriber::active(const std::string& channel) {
    if (fork_guard_.forked()) return false;
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel);
    return it != channels_.end() && it->second.active;
}

void Subscriber::on_ready() {
    std::lock_guard lock(mutex_);
    outstanding_acks_.clear();  // acks of the old connection never come
    std::vector<std::string_view> names;
    names.reserve(channels_.size());
    for (auto& [name, entry] : channels_) {
        // A channel that was active before this connection may have missed
        // messages; tell its listeners once the server confirms again.
        entry.announce_resubscribe = entry.active || entry.announce_resubscribe;
        entry.active = false;
        names.push_back(name);
    }
    if (!names.empty()) send_counted("SUBSCRIBE", names);
}

void Subscriber::on_push(Reply&& reply) {
    if (!reply.is_array() || reply.elements.size() < 3) return;
    const auto& kind = reply.elements[0].text;
    const auto& channel = reply.elements[1].text;
    if (kind == "message") {
        notify(channel, Subscription::Event::message, reply.elements[2].text, false);
    } else if (kind == "subscribe" || kind == "unsubscribe") {
        {
            std::lock_guard lock(mutex_);
            auto ack = outstanding_acks_.find(channel);
            if (ack != outstanding_acks_.end() && --ack->second == 0) outstanding_acks_.erase(ack);
            if (outstanding_acks_.count(channel)) return;  // a later (UN)SUBSCRIBE is still on its way
            auto it = channels_.find(channel);
            if (it == channels_.end()) return;
            it->second.active = true;
        }
        confirmed_.notify_all();
        notify(channel, Subscription::Event::resubscribed, {}, true);
    }
}

void Subscriber::notify(const std::string& channel, Subscription::Event event, std::string_view payload,
                        bool only_if_announced) {
    std::lock_guard dispatch(dispatch_mutex_);
    std::vector<ListenerPtr> listeners;
    {
        std::lock_guard lock(mutex_);
        auto it = channels_.find(channel);
        if (it == channels_.end()) return;
        if (only_if_announced) {
            if (!it->second.announce_resubscribe) return;
            it->second.announce_resubscribe = false;
        }
        listeners.reserve(it->second.listeners.size());
        for (auto& [id, listener] : it->second.listeners) listeners.push_back(listener);
    }
    for (auto& listener : listeners) (*listener)(event, payload);
}

}  // namespace dlock::detail

namespace dlock {

Subscription::Subscription(Subscription&& other) noexcept
    : subscriber_(std::move(other.subscriber_)), channel_(std::move(other.channel_)), id_(other.id_) {}

Subscription& Subscription::operator=(Subscription&& other) noexcept {
    if (this != &other) {
        reset();
        subscriber_ = std::move(other.subscriber_);
        channel_ = std::move(other.channel_);
        id_ = other.id_;
    }
    return *this;
}

Subscription::~Subscription() { reset(); }

void Subscription::reset() noexcept {
    if (!subscriber_) return;
    try {
        subscriber_->remove(channel_, id_);
    } catch (...) {
        // remove() only allocates; losing an UNSUBSCRIBE costs a stray message, never correctness.
    }
    subscriber_.reset();
}

bool Subscription::wait_active(std::chrono::steady_clock::time_point deadline) const {
    return subscriber_ && subscriber_->wait_active(channel_, deadline);
}

bool Subscription::active() const { return subscriber_ && subscriber_->active(channel_); }

}  // namespace dlock
