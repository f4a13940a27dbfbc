#include <algorithm>
#include <set>

#include "cluster_router_internal.hpp"
#include "command_format.hpp"
#include "reported_address.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {

std::error_code ClusterRouter::wait_for_map_locked(std::span<const std::string_view> formatted,
                                                   std::span<Completion> dones, Clock::time_point deadline) {
    if (map_failed_) {
        refresh_soon();
        return last_error_;
    }
    for (std::size_t i = 0; i < formatted.size(); ++i)
        waiting_.push_back({std::string(formatted[i]), std::move(dones[i]), deadline});
    asio::post(io_, [self = shared_from_this()] { self->expire_waiting(); });
    return {};
}

// I/O thread: fails the commands whose deadline passed while they waited for
// the first map (a seed that accepts and says nothing holds the map back for
// a whole connect timeout), and waits for the next deadline.
void ClusterRouter::expire_waiting() {
    std::vector<Waiting> expired;
    std::optional<Clock::time_point> next;
    const auto now = Clock::now();
    {
        std::lock_guard lock(mutex_);
        for (auto it = waiting_.begin(); it != waiting_.end();) {
            if (it->deadline <= now) {
                expired.push_back(std::move(*it));
                it = waiting_.erase(it);
                continue;
            }
            if (!next || it->deadline < *next) next = it->deadline;
            ++it;
        }
    }
    if (next) {
        waiting_timer_.expires_at(*next);
        waiting_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
            if (auto self = weak.lock(); self && !ec) self->expire_waiting();
        });
    }
    for (auto& item : expired) item.done(errc::command_timeout, Reply{});
}

void ClusterRouter::on_change(ChangeListener listener) {
    std::lock_guard lock(mutex_);
    listeners_.push_back(std::make_shared<ChangeListener>(std::move(listener)));
}

void ClusterRouter::tell_listeners() {
    std::vector<std::shared_ptr<ChangeListener>> listeners;
    {
        std::lock_guard lock(mutex_);
        listeners = listeners_;
    }
    std::vector<std::shared_ptr<ChangeListener>> finished;
    for (auto& listener : listeners)
        if (!(*listener)()) finished.push_back(listener);
    std::lock_guard lock(mutex_);
    std::erase_if(listeners_, [&](const auto& listener) {
        return std::find(finished.begin(), finished.end(), listener) != finished.end();
    });
}

void ClusterRouter::refresh_soon() {
    asio::post(io_, [weak = weak_from_this()] {
        auto self = weak.lock();
        if (!self || self->shut_down()) return;
        if (self->refreshing_) {
            self->refresh_again_ = true;
            return;
        }
        const auto since = Clock::now() - self->last_refresh_;
        if (since >= min_refresh_gap) return self->refresh_now();
        self->refresh_timer_.expires_after(min_refresh_gap - since);
        self->refresh_timer_.async_wait([self](std::error_code ec) {
            if (!ec && !self->refreshing_ && !self->shut_down()) self->refresh_now();
        });
    });
}

// A wait that had already completed when shutdown() cancelled the timer still
// runs its handler with no error: without the check here it would re-arm
// for ever, and the I/O thread (and the Client's destructor) never end.
void ClusterRouter::schedule_periodic_refresh() {
    if (shut_down()) return;
    periodic_timer_.expires_after(options_.cluster_refresh_interval);
    periodic_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (ec) return;
        if (!self->refreshing_) self->refresh_now();
        self->schedule_periodic_refresh();
    });
}

void ClusterRouter::refresh_now() {
    refreshing_ = true;
    refresh_again_ = false;
    last_refresh_ = Clock::now();
    // The masters we know first (they answer fastest), then the seeds.
    std::vector<ServerAddress> candidates = masters();
    for (const auto& seed : address_.endpoints) candidates.push_back(address_.node(seed.host, seed.port));
    if (address_.endpoints.empty()) candidates.push_back(address_.node(address_.host, address_.port));
    ask_for_map(std::move(candidates), 0, {});
}

void ClusterRouter::ask_for_map(std::vector<ServerAddress> candidates, std::size_t index, std::string errors) {
    std::shared_ptr<Connection> connection;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return;
        if (index < candidates.size()) connection = node_locked(candidates[index].host, candidates[index].port).connection;
    }
    if (!connection) {
        refreshing_ = false;
        map_failed(errc::cluster_down, "no cluster node gave a slot map:" + errors);
        return;
    }
    std::string bytes;
    const std::string_view args[] = {"CLUSTER", "SLOTS"};
    append_command(bytes, args);
    const auto deadline = Clock::now() + std::min(options_.connect_timeout, options_.command_timeout);
    auto asked = candidates[index];
    Completion done = [self = shared_from_this(), candidates = std::move(candidates), index, errors, asked](
                          std::error_code ec, Reply&& reply) mutable {
        {
            std::lock_guard lock(self->mutex_);
            if (self->shut_down_) return;
        }
        if (!ec && self->apply_map(reply, asked)) {
            self->refreshing_ = false;
            if (self->refresh_again_) self->refresh_soon();
            return;
        }
        std::string why = ec ? ec.message() : "an answer that is not a slot map";
        if (reply.is_error() && !reply.text.empty()) why += " (" + reply.text.substr(0, 200) + ")";
        errors += " " + asked.to_string() + ": " + why + ";";
        if (index + 1 == candidates.size()) {
            self->refreshing_ = false;
            self->map_failed(ec ? ec : make_error_code(errc::cluster_down), "no cluster node gave a slot map:" + errors);
            return;
        }
        self->ask_for_map(std::move(candidates), index + 1, std::move(errors));
    };
    if (auto ec = connection->submit(bytes, done, deadline)) {
        Reply detail = Reply::make_error(connection->last_error_detail());
        done(ec, std::move(detail));
    }
}

// CLUSTER SLOTS: [[start, end, [host, port, id, ...], replicas...], ...].
// Anything malformed rejects the whole answer: a partial map would route
// slots to nobody.
bool ClusterRouter::apply_map(const Reply& reply, const ServerAddress& asked) {
    if (!reply.is_array()) return false;
    struct Range {
        std::uint16_t first, last;
        std::string host;
        std::uint16_t port;
    };
    std::vector<Range> ranges;
    for (const auto& entry : reply.elements) {
        if (!entry.is_array() || entry.elements.size() < 3 || !entry.elements[0].is_integer() ||
            !entry.elements[1].is_integer() || !entry.elements[2].is_array() || entry.elements[2].elements.size() < 2)
            return false;
        const auto first = entry.elements[0].integer, last = entry.elements[1].integer;
        if (first < 0 || last < first || last >= cluster_slots) return false;
        const auto& master = entry.elements[2];
        std::string host = master.elements[0].is_text() ? master.elements[0].text : std::string();
        if (host.empty() || host == "?") host = asked.host;  // "the node you asked"
        if (!plausible_host(host) || !master.elements[1].is_integer()) return false;
        const auto port = master.elements[1].integer;
        if (port <= 0 || port > 65535) return false;
        ranges.push_back({static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last), std::move(host),
                          static_cast<std::uint16_t>(port)});
    }
    if (ranges.empty()) return false;
    std::set<std::string> in_map;
    for (const auto& range : ranges) in_map.insert(node_key(range.host, range.port));
    if (in_map.size() > max_nodes) return false;
    bool changed = false;
    std::deque<Waiting> waiting;
    std::vector<std::shared_ptr<Connection>> retired;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return true;
        // Changed: some slot has another master (compared by address, before
        // any node is closed below).
        std::array<const Range*, cluster_slots> wanted{};
        for (const auto& range : ranges)
            for (unsigned slot = range.first; slot <= range.last; ++slot) wanted[slot] = &range;
        for (unsigned slot = 0; map_known_ && !changed && slot < cluster_slots; ++slot) {
            const Node* was = slots_[slot];
            const Range* now = wanted[slot];
            changed = !was != !now || (was && (was->address.host != now->host || was->address.port != now->port));
        }
        // Nodes the map no longer names (replaced, demoted, gone) are closed
        // once nothing waits on them: over a long life a cluster's nodes
        // change address, and connections to the old ones would reconnect
        // forever and count against max_nodes.
        std::erase_if(nodes_, [&](auto& entry) {
            if (in_map.count(entry.first) || !entry.second.connection->idle()) return false;
            retired.push_back(entry.second.connection);
            return true;
        });
        std::array<Node*, cluster_slots> slots{};
        for (const auto& range : ranges) {
            auto* node = &node_locked(range.host, range.port);
            for (unsigned slot = range.first; slot <= range.last; ++slot) slots[slot] = node;
        }
        slots_ = slots;
        ++counts_.refreshes;
        map_known_ = true;
        map_failed_ = false;
        last_error_.clear();
        last_error_detail_.clear();
        waiting.swap(waiting_);
    }
    map_changed_.notify_all();
    for (auto& connection : retired) connection->shutdown();
    for (auto& item : waiting) {
        if (Clock::now() >= item.deadline) {
            item.done(errc::command_timeout, Reply{});
            continue;
        }
        if (auto ec = submit(item.bytes, item.done, item.deadline)) item.done(ec, Reply{});
    }
    if (changed) tell_listeners();
    return true;
}

void ClusterRouter::map_failed(std::error_code ec, const std::string& detail) {
    std::deque<Waiting> waiting;
    {
        std::lock_guard lock(mutex_);
        if (map_known_) return;  // the old map stays in use; the next refresh tries again
        map_failed_ = true;
        last_error_ = ec;
        last_error_detail_ = detail;
        waiting.swap(waiting_);
    }
    map_changed_.notify_all();
    for (auto& item : waiting) item.done(ec, Reply::make_error(detail));
}

}  // namespace dlock::detail
