#include "subscriber.hpp"

#include <set>
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

Subscriber::Subscriber(asio::io_context& io, ClientOptions options, std::shared_ptr<Topology> topology)
    : io_(io), options_(std::move(options)), topology_(std::move(topology)), sharded_(topology_->sharded()) {}

Subscriber::Shard& Subscriber::shard_locked(const Topology::Home& home) {
    auto it = shards_.find(home.key);
    if (it != shards_.end()) return *it->second;
    auto shard = std::make_unique<Shard>();
    shard->key = home.key;
    auto* raw = shard.get();
    Connection::Hooks hooks;
    // The hooks run on the I/O thread while this object is alive: the client
    // core shuts the connections down before letting go of the subscriber.
    hooks.on_ready = [this, raw] { on_ready(*raw); };
    hooks.on_push = [this, raw](Reply&& reply) { on_push(*raw, std::move(reply)); };
    auto options = options_;
    options.client_name = options.client_name.empty() ? std::string() : options.client_name + ":sub";
    shard->connection = topology_->connect(home, std::move(options), Connection::Mode::subscriber, std::move(hooks));
    if (started_) shard->connection->start();
    return *shards_.emplace(home.key, std::move(shard)).first->second;
}

Subscriber::Shard* Subscriber::place_locked(const std::string& channel) {
    if (shut_down_) return nullptr;
    auto home = topology_->channel_home(channel);
    return home ? &shard_locked(*home) : nullptr;
}

void Subscriber::start() {
    std::vector<std::shared_ptr<Connection>> connections;
    {
        std::lock_guard lock(mutex_);
        started_ = true;
        for (auto& [key, shard] : shards_) connections.push_back(shard->connection);
    }
    for (auto& connection : connections) connection->start();
    if (sharded_) {
        topology_->on_change([weak = weak_from_this()] {
            auto self = weak.lock();
            if (self) self->replace_channels();
            return self != nullptr;
        });
    }
}

void Subscriber::shutdown() {
    // Subscriptions may outlive the client: nothing bound to its I/O context
    // (connections, the timer, the topology) stays with this object, whose
    // channels then answer at once and send nothing.
    std::map<std::string, std::unique_ptr<Shard>> shards;
    std::shared_ptr<Topology> topology;
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
        shards.swap(shards_);
        topology.swap(topology_);
        for (auto& [name, entry] : channels_) {
            entry.shard = nullptr;
            entry.active = false;
        }
    }
    confirmed_.notify_all();
    replace_timer_.reset();  // cancels its wait
    for (auto& [key, shard] : shards) {
        shard->connection->shutdown();
        // Gone after the handlers already queued for it (its hooks point at it).
        asio::post(io_, [retired = std::shared_ptr<Shard>(std::move(shard))] {});
    }
}

void Subscriber::send_counted(Shard& shard, bool subscribe, const std::vector<std::string_view>& channels) {
    std::string bytes;
    if (sharded_) {
        // One command per channel: the channels of one SSUBSCRIBE must share a slot.
        for (auto channel : channels) append_channel_command(bytes, subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE", {channel});
    } else {
        append_channel_command(bytes, subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channels);
    }
    // Not ready: nothing is sent, and on_ready subscribes every channel.
    if (!shard.connection->send_if_ready(bytes)) return;
    for (auto channel : channels) ++shard.outstanding_acks[std::string(channel)];
    const std::size_t per_command = sharded_ ? 1 : channels_per_command;
    for (std::size_t i = 0; i < channels.size(); i += per_command) {
        auto& sent = shard.sent.emplace_back(Shard::Sent{subscribe, {}});
        for (std::size_t j = i; j < std::min(channels.size(), i + per_command); ++j) sent.channels.emplace_back(channels[j]);
    }
}

void Subscriber::acknowledged_locked(Shard& shard) {
    if (shard.sent.empty()) return;
    auto& oldest = shard.sent.front();
    if (++oldest.acked >= oldest.channels.size()) shard.sent.pop_front();
}

Subscriber::Refusal Subscriber::refused_locked(Shard& shard, const Reply& reply) {
    Refusal refusal;
    if (shard.sent.empty()) return refusal;  // no command of ours waits: not an answer to us
    auto command = std::move(shard.sent.front());
    shard.sent.pop_front();
    // NOPERM (an ACL without rights on the channel) is for good, until a
    // reconnect. Any other error (BUSY while a script runs too long, MOVED
    // in a cluster, ...) passes: the channel is placed and asked for again.
    const bool forbidden = reply.text.starts_with("NOPERM");
    // One error refuses a whole command, but the user may lack rights on
    // some of its channels only (a reconnect subscribes them all at once):
    // each is asked for again on its own, and only a channel refused alone
    // counts as refused.
    const bool alone = command.channels.size() == 1;
    std::vector<std::string_view> again;
    std::string first_refused;
    // Its channels not acknowledged yet get no acknowledgement now.
    for (std::size_t i = command.acked; i < command.channels.size(); ++i) {
        const auto& name = command.channels[i];
        auto ack = shard.outstanding_acks.find(name);
        if (ack != shard.outstanding_acks.end() && --ack->second == 0) shard.outstanding_acks.erase(ack);
        if (!command.subscribe || shard.outstanding_acks.count(name)) continue;
        auto it = channels_.find(name);
        if (it == channels_.end() || it->second.shard != &shard || it->second.active) continue;
        if (!forbidden) {
            displaced_locked(it->second);
            refusal.place_again = true;
        } else if (!alone) {
            again.push_back(it->first);
        } else {
            it->second.refused = reply.text;
            if (first_refused.empty()) first_refused = name;
        }
    }
    for (auto name : again) send_counted(shard, true, {name});
    if (first_refused.empty() || warned_of_refusal_ || !options_.on_warning) return refusal;
    warned_of_refusal_ = true;
    refusal.warning = "the server refused to subscribe to " + first_refused + " (" + reply.text +
                      "): a force-release reaches this client's holders only at their next renewal, and its "
                      "waiters notice a release only when they try again; give the ACL user pub/sub rights on "
                      "dlock's channels (for example ACL SETUSER <user> allchannels)";
    return refusal;
}

Subscription Subscriber::add(std::string channel, Subscription::Listener listener) {
    unsigned long long id;
    bool unplaced = false;
    {
        std::lock_guard lock(mutex_);
        id = next_id_++;
        auto& entry = channels_[channel];
        bool first = entry.listeners.empty();
        entry.listeners.emplace(id, std::make_shared<Subscription::Listener>(std::move(listener)));
        if (first) {
            entry.shard = place_locked(channel);
            if (entry.shard) send_counted(*entry.shard, true, {channel});
            else unplaced = !shut_down_;
        }
    }
    if (unplaced) schedule_replace();  // once the slot map is in
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
        auto* shard = it->second.shard;
        channels_.erase(it);
        if (shard) send_counted(*shard, false, {channel});
    }
}

bool Subscriber::wait_active(const std::string& channel, Clock::time_point deadline) {
    if (fork_guard_.forked()) return false;  // only the parent's I/O thread could confirm it
    std::unique_lock lock(mutex_);
    bool active = false;
    confirmed_.wait_until(lock, deadline, [&] {
        if (shut_down_) return true;  // its client is gone: never active
        auto it = channels_.find(channel);
        if (it == channels_.end()) return false;
        active = it->second.active;
        return active || !it->second.refused.empty();
    });
    return active;
}

bool Subscriber::refused(const std::string& channel) {
    if (fork_guard_.forked()) return false;
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel);
    return it != channels_.end() && !it->second.refused.empty();
}

bool Subscriber::active(const std::string& channel) {
    if (fork_guard_.forked()) return false;
    std::lock_guard lock(mutex_);
    auto it = channels_.find(channel);
    return it != channels_.end() && it->second.active;
}

bool Subscriber::failing(const Subscription& s) {
    if (!s.subscriber_) return true;
    std::shared_ptr<Connection> connection;
    {
        std::lock_guard lock(s.subscriber_->mutex_);
        if (s.subscriber_->shut_down_) return true;  // its client is gone
        auto it = s.subscriber_->channels_.find(s.channel_);
        if (it == s.subscriber_->channels_.end()) return true;
        if (!it->second.refused.empty()) return true;
        if (!it->second.shard) return false;  // being placed (a cluster's slot map): on its way
        connection = it->second.shard->connection;
    }
    if (!connection) return false;
    // At once: ready, connecting (connect_timeout at this deadline), or the last attempt's error.
    const auto ec = connection->wait_connected(Clock::now());
    return ec && ec != errc::connect_timeout;
}

void Subscriber::on_ready(Shard& shard) {
    std::lock_guard lock(mutex_);
    shard.outstanding_acks.clear();  // acks of the old connection never come
    shard.sent.clear();
    std::vector<std::string_view> names;
    for (auto& [name, entry] : channels_) {
        if (entry.shard != &shard) continue;
        // A channel that was active before this connection may have missed
        // messages; tell its listeners once the server confirms again.
        entry.announce_resubscribe = entry.active || entry.announce_resubscribe;
        entry.active = false;
        entry.refused.clear();  // asked again now
        names.push_back(name);
    }
    if (!names.empty()) send_counted(shard, true, names);
}

void Subscriber::displaced_locked(Channel& entry) {
    entry.announce_resubscribe = entry.active || entry.announce_resubscribe;
    entry.active = false;
    entry.shard = nullptr;
}

void Subscriber::on_push(Shard& shard, Reply&& reply) {
    // A retired shard's last pushes, after the client shut down (the I/O
    // thread alone writes shut_down_, so it reads it without the lock).
    if (shut_down_) return;
    if (reply.is_error()) {
        // The answer to our oldest (S)SUBSCRIBE: refused for good (NOPERM),
        // or to be asked for again (MOVED: once the slot map is refreshed).
        Refusal refusal;
        {
            std::lock_guard lock(mutex_);
            refusal = refused_locked(shard, reply);
        }
        // Warned before the waiters see the refusal, so whoever sees it can
        // count on the warning having been given.
        if (!refusal.warning.empty()) {
            try {
                options_.on_warning(refusal.warning);
            } catch (...) {
                // A warning hook must not take the I/O thread down.
            }
        }
        confirmed_.notify_all();
        if (!refusal.place_again) return;
        if (sharded_) topology_->refresh_soon();
        return schedule_replace();
    }
    if (!reply.is_array() || reply.elements.size() < 3) return;
    const auto& kind = reply.elements[0].text;
    const auto& channel = reply.elements[1].text;
    if (kind == "message" || kind == "smessage") {
        notify(channel, Subscription::Event::message, reply.elements[2].text, false);
    } else if (kind == "subscribe" || kind == "unsubscribe" || kind == "ssubscribe" || kind == "sunsubscribe") {
        bool dropped = false;
        {
            std::lock_guard lock(mutex_);
            auto ack = shard.outstanding_acks.find(channel);
            auto it = channels_.find(channel);
            if (ack != shard.outstanding_acks.end()) acknowledged_locked(shard);
            if (ack == shard.outstanding_acks.end()) {
                // Not an answer to us: the server dropped the channel (its
                // slot moved away, or the node became a replica).
                if (!sharded_ || kind != "sunsubscribe" || it == channels_.end() || it->second.shard != &shard) return;
                displaced_locked(it->second);
                dropped = true;
            } else {
                if (--ack->second == 0) shard.outstanding_acks.erase(ack);
                if (shard.outstanding_acks.count(channel)) return;  // a later one is still on its way
                if (it == channels_.end() || it->second.shard != &shard) return;
                it->second.active = true;
                it->second.refused.clear();
            }
        }
        if (dropped) {
            topology_->refresh_soon();
            return schedule_replace();
        }
        confirmed_.notify_all();
        notify(channel, Subscription::Event::resubscribed, {}, true);
    }
}

void Subscriber::schedule_replace() {
    asio::post(io_, [weak = weak_from_this()] {
        auto self = weak.lock();
        if (!self || self->replace_scheduled_) return;
        {
            std::lock_guard lock(self->mutex_);
            if (self->shut_down_) return;
        }
        if (!self->replace_timer_) self->replace_timer_ = std::make_unique<asio::steady_timer>(self->io_);
        self->replace_scheduled_ = true;
        // After the refresh that the drop asked for has had its chance.
        self->replace_timer_->expires_after(min_map_refresh_gap * 2);
        self->replace_timer_->async_wait([self](std::error_code ec) {
            self->replace_scheduled_ = false;
            if (!ec) self->replace_channels();
        });
    });
}

void Subscriber::replace_channels() {
    bool unplaced = false;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return;
        for (auto& [name, entry] : channels_) {
            auto* target = place_locked(name);
            if (!target) {
                unplaced = true;
                continue;
            }
            if (target == entry.shard) continue;
            if (entry.shard && entry.active) send_counted(*entry.shard, false, {name});
            entry.announce_resubscribe = entry.active || entry.announce_resubscribe || entry.shard == nullptr;
            entry.active = false;
            entry.shard = target;
            send_counted(*target, true, {name});
        }
        if (sharded_) retire_unused_shards_locked();
    }
    if (unplaced) schedule_replace();
}

// A shard no channel is on, for a node that serves no slot now, is closed:
// over a long life a cluster's nodes change address, and connections to the
// old ones would reconnect forever. Its object goes after the handlers
// already queued on the I/O thread (its hooks point at it).
void Subscriber::retire_unused_shards_locked() {
    std::set<std::string> masters;
    for (const auto& master : topology_->masters()) masters.insert(master.host + ":" + std::to_string(master.port));
    std::set<const Shard*> used;
    for (const auto& [name, entry] : channels_) used.insert(entry.shard);
    for (auto it = shards_.begin(); it != shards_.end();) {
        if (masters.count(it->first) || used.count(it->second.get())) {
            ++it;
            continue;
        }
        it->second->connection->shutdown();
        asio::post(io_, [retired = std::shared_ptr<Shard>(std::move(it->second))] {});
        it = shards_.erase(it);
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
            auto& entry = it->second;
            if (!entry.announce_resubscribe && !entry.announce_first) return;
            if (!entry.announce_resubscribe) event = Subscription::Event::subscribed;
            entry.announce_resubscribe = entry.announce_first = false;
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

bool Subscription::refused() const { return subscriber_ && subscriber_->refused(channel_); }

}  // namespace dlock
