#include "cluster_router.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "command_format.hpp"
#include "reported_address.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// The most distinct nodes one client keeps connections to: far more than a
// cluster has masters, so that a map that names hostile numbers of nodes
// cannot make it open sockets without end.
constexpr std::size_t max_nodes = 1024;

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": the node named.
struct Redirect {
    std::uint16_t slot;
    std::string host;
    std::uint16_t port;
};

std::optional<Redirect> read_redirect(std::string_view text) {
    auto space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    text.remove_prefix(space + 1);
    space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    unsigned slot = 0;
    auto slot_text = text.substr(0, space);
    auto [end, error] = std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
    if (error != std::errc{} || end != slot_text.data() + slot_text.size() || slot >= cluster_slots)
        return std::nullopt;
    auto where = text.substr(space + 1);
    auto colon = where.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto port = reported_port(where.substr(colon + 1));
    auto host = where.substr(0, colon);
    if (!host.empty() && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (!port || !plausible_host(host)) return std::nullopt;
    return Redirect{static_cast<std::uint16_t>(slot), std::string(host), *port};
}

const std::string& asking_command() {
    static const std::string bytes = [] {
        std::string out;
        const std::string_view args[] = {"ASKING"};
        append_command(out, args);
        return out;
    }();
    return bytes;
}

}  // namespace

struct ClusterRouter::Routed {
    std::string bytes;
    Completion done;
    Clock::time_point deadline;
    int redirects = 0;  // MOVED and ASK hops since the last pause: a loop between nodes ends
    std::unique_ptr<asio::steady_timer> pause;
};

ClusterRouter::ClusterRouter(asio::io_context& io, ServerAddress address, ClientOptions options)
    : io_(io),
      address_(std::move(address)),
      options_(std::move(options)),
      refresh_timer_(io),
      periodic_timer_(io),
      waiting_timer_(io) {}

std::string ClusterRouter::node_key(const std::string& host, std::uint16_t port) {
    return host + ":" + std::to_string(port);
}

ClusterRouter::Node& ClusterRouter::node_locked(const std::string& host, std::uint16_t port) {
    auto key = node_key(host, port);
    auto it = nodes_.find(key);
    if (it != nodes_.end()) return it->second;
    Node node{address_.node(host, port), nullptr};
    node.connection =
        std::make_shared<Connection>(io_, node.address, options_, Connection::Mode::request_reply);
    node.connection->start();
    return nodes_.emplace(std::move(key), std::move(node)).first->second;
}

std::optional<std::uint16_t> ClusterRouter::slot_of(std::string_view formatted) {
    if (auto key = routing_key(formatted)) return key_slot(*key);
    return std::nullopt;
}

std::shared_ptr<Connection> ClusterRouter::route_locked(std::optional<std::uint16_t> slot) {
    if (slot) return slots_[*slot] ? slots_[*slot]->connection : nullptr;
    for (auto* node : slots_)
        if (node) return node->connection;
    return nullptr;
}

void ClusterRouter::start() {
    asio::post(io_, [self = shared_from_this()] {
        self->refresh_now();
        self->schedule_periodic_refresh();
    });
}

void ClusterRouter::shutdown() {
    std::deque<Waiting> waiting;
    std::vector<std::shared_ptr<Connection>> connections;
    {
        std::lock_guard lock(mutex_);
        shut_down_ = true;
        waiting.swap(waiting_);
        for (auto& [key, node] : nodes_) connections.push_back(node.connection);
    }
    map_changed_.notify_all();
    refresh_timer_.cancel();
    periodic_timer_.cancel();
    asio::post(io_, [self = shared_from_this()] { self->waiting_timer_.cancel(); });
    {
        std::lock_guard lock(mutex_);
        listeners_.clear();
    }
    for (auto& item : waiting) item.done(errc::client_closed, Reply{});
    for (auto& connection : connections) connection->shutdown();
}

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

std::error_code ClusterRouter::submit(std::string_view formatted, Completion& done, Clock::time_point deadline) {
    const auto slot = slot_of(formatted);
    std::shared_ptr<Connection> connection;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return errc::client_closed;
        if (!map_known_) return wait_for_map_locked({&formatted, 1}, {&done, 1}, deadline);
        connection = route_locked(slot);
    }
    if (!connection) {
        refresh_soon();
        return errc::cluster_down;
    }
    auto routed = std::make_shared<Routed>();
    routed->bytes.assign(formatted);
    routed->done = std::move(done);
    routed->deadline = deadline;
    if (auto ec = send(routed, connection, false)) {
        done = std::move(routed->done);  // the caller fails it
        return ec;
    }
    return {};
}

std::error_code ClusterRouter::submit_to(const ServerAddress& node, std::string_view formatted, Completion& done,
                                         Clock::time_point deadline) {
    std::shared_ptr<Connection> connection;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return errc::client_closed;
        auto it = nodes_.find(node_key(node.host, node.port));
        if (it == nodes_.end()) return errc::cluster_down;
        connection = it->second.connection;
    }
    return connection->submit(formatted, done, deadline);
}

std::error_code ClusterRouter::submit_many(std::span<const std::string_view> formatted,
                                           std::vector<Completion>& dones, Clock::time_point deadline) {
    // Grouped by master, each group in one write; a group that cannot be
    // sent fails alone.
    std::map<Connection*, std::pair<std::shared_ptr<Connection>, std::vector<std::size_t>>> groups;
    std::vector<std::size_t> unrouted;
    {
        std::lock_guard lock(mutex_);
        if (shut_down_) return errc::client_closed;
        if (!map_known_) return wait_for_map_locked(formatted, dones, deadline);
        for (std::size_t i = 0; i < formatted.size(); ++i) {
            auto connection = route_locked(slot_of(formatted[i]));
            if (!connection) {
                unrouted.push_back(i);
                continue;
            }
            auto& group = groups[connection.get()];
            group.first = connection;
            group.second.push_back(i);
        }
    }
    for (auto& [raw, group] : groups) {
        std::vector<std::shared_ptr<Routed>> routed;
        std::vector<std::string_view> views;
        std::vector<Completion> wrapped;
        for (auto i : group.second) {
            auto r = std::make_shared<Routed>();
            r->bytes.assign(formatted[i]);
            r->done = std::move(dones[i]);
            r->deadline = deadline;
            views.push_back(r->bytes);
            wrapped.push_back([self = shared_from_this(), r](std::error_code ec, Reply&& reply) {
                self->on_reply(r, ec, std::move(reply));
            });
            routed.push_back(std::move(r));
        }
        if (auto ec = group.first->submit_many(views, wrapped, deadline)) {
            // A node let go after the routing above: nothing was sent.
            if (ec == errc::client_closed) ec = errc::not_connected;
            refresh_soon();
            // Taken from the caller: failed later, on the I/O thread, as
            // completions always run.
            asio::post(io_, [self = shared_from_this(), routed = std::move(routed), ec,
                             detail = group.first->last_error_detail()] {
                for (auto& r : routed) self->finish(r, ec, Reply::make_error(detail));
            });
        }
    }
    if (!unrouted.empty()) refresh_soon();
    for (auto i : unrouted) {
        auto done = std::move(dones[i]);
        asio::post(io_, [done = std::move(done)]() mutable { done(errc::cluster_down, Reply{}); });
    }
    return {};
}

std::error_code ClusterRouter::send(const std::shared_ptr<Routed>& routed,
                                    const std::shared_ptr<Connection>& connection, bool asking) {
    Completion on_reply = [self = shared_from_this(), routed](std::error_code ec, Reply&& reply) {
        self->on_reply(routed, ec, std::move(reply));
    };
    std::error_code ec;
    if (!asking) {
        ec = connection->submit(routed->bytes, on_reply, routed->deadline);
    } else {
        // Together, in one write: ASKING applies to the next command on
        // the connection, and nothing of another thread may come between.
        const std::string_view both[] = {asking_command(), routed->bytes};
        std::vector<Completion> dones;
        dones.push_back([](std::error_code, Reply&&) {});
        dones.push_back(std::move(on_reply));
        ec = connection->submit_many(both, dones, routed->deadline);
    }
    if (ec == errc::client_closed) {
        // The node was closed after this command was routed to it: the map
        // no longer names it (apply_map). Routed again, once.
        std::shared_ptr<Connection> again;
        {
            std::lock_guard lock(mutex_);
            if (!shut_down_) again = route_locked(slot_of(routed->bytes));
        }
        if (again && again != connection) return send(routed, again, false);
        if (again) ec = errc::not_connected;  // nothing was sent; the caller may try again
    }
    if (ec) refresh_soon();
    return ec;
}

void ClusterRouter::on_reply(const std::shared_ptr<Routed>& routed, std::error_code ec, Reply&& reply) {
    if (reply.is_error()) {
        const std::string_view text = reply.text;
        const bool moved = starts_with(text, "MOVED "), ask = starts_with(text, "ASK ");
        if ((moved || ask) && routed->redirects < max_redirects && Clock::now() < routed->deadline) {
            if (auto redirect = read_redirect(text)) {
                ++routed->redirects;
                std::shared_ptr<Connection> connection;
                bool closed = false;
                {
                    // Completions run outside the lock: they may submit again.
                    std::lock_guard lock(mutex_);
                    closed = shut_down_;
                    if (!closed && (nodes_.size() < max_nodes || nodes_.count(node_key(redirect->host, redirect->port)))) {
                        auto& node = node_locked(redirect->host, redirect->port);
                        if (moved) slots_[redirect->slot] = &node;  // at once; the refresh brings the rest
                        ++(moved ? counts_.moved : counts_.asked);
                        connection = node.connection;
                    }
                }
                if (closed) return finish(routed, errc::client_closed, Reply{});
                if (!connection) return finish(routed, ec, std::move(reply));  // past max_nodes
                if (moved) refresh_soon();
                if (auto send_ec = send(routed, connection, ask))
                    finish(routed, send_ec, Reply::make_error(connection->last_error_detail()));
                return;
            }
        }
        if (ec == errc::slot_migrating || ec == errc::cluster_down) return retry_later(routed, ec, std::move(reply));
    } else if (ec == errc::connection_lost || ec == errc::connection_refused || ec == errc::command_timeout ||
               ec == errc::connect_timeout || ec == errc::not_connected) {
        refresh_soon();  // the node may be gone, and its slots with it
    } else if (ec == errc::client_closed) {
        // Its node was let go (apply_map) with this command on it, which
        // may have been written: to the caller, a connection lost in flight.
        bool closed = false;
        {
            std::lock_guard lock(mutex_);
            closed = shut_down_;
        }
        if (!closed) ec = errc::connection_lost;
    }
    finish(routed, ec, std::move(reply));
}

void ClusterRouter::retry_later(const std::shared_ptr<Routed>& routed, std::error_code ec, Reply&& reply) {
    // Bounded by the deadline: every retry waits retry_pause first. A
    // migration's TRYAGAIN may follow an ASK; after the pause the hops count
    // afresh.
    if (Clock::now() + retry_pause >= routed->deadline) return finish(routed, ec, std::move(reply));
    routed->redirects = 0;
    {
        std::lock_guard lock(mutex_);
        ++counts_.retried;
    }
    refresh_soon();
    if (!routed->pause) routed->pause = std::make_unique<asio::steady_timer>(io_);
    routed->pause->expires_after(retry_pause);
    routed->pause->async_wait([self = shared_from_this(), routed, ec, reply = std::move(reply)](
                                  std::error_code timer_ec) mutable {
        if (timer_ec) return self->finish(routed, errc::client_closed, Reply{});
        std::shared_ptr<Connection> connection;
        bool closed = false;
        {
            std::lock_guard lock(self->mutex_);
            closed = self->shut_down_;
            if (!closed) connection = self->route_locked(slot_of(routed->bytes));
        }
        if (closed) return self->finish(routed, errc::client_closed, Reply{});
        if (!connection) return self->finish(routed, ec, std::move(reply));
        if (auto send_ec = self->send(routed, connection, false))
            self->finish(routed, send_ec, Reply::make_error(connection->last_error_detail()));
    });
}

void ClusterRouter::finish(const std::shared_ptr<Routed>& routed, std::error_code ec, Reply&& reply) {
    auto done = std::move(routed->done);
    routed->done = nullptr;
    if (done) done(ec, std::move(reply));
}

std::error_code ClusterRouter::wait_connected(Clock::time_point deadline) {
    std::shared_ptr<Connection> connection;
    {
        std::unique_lock lock(mutex_);
        if (!map_changed_.wait_until(lock, deadline, [&] { return map_known_ || map_failed_ || shut_down_; }))
            return errc::connect_timeout;
        if (shut_down_) return errc::client_closed;
        if (!map_known_) return last_error_;
        connection = route_locked(std::uint16_t{0});
        if (!connection) connection = route_locked(std::nullopt);
    }
    if (!connection) return errc::cluster_down;
    return connection->wait_connected(deadline);
}

std::string ClusterRouter::last_error_detail() const {
    std::lock_guard lock(mutex_);
    return last_error_detail_;
}

std::optional<ServerAddress> ClusterRouter::master_for_slot(std::uint16_t slot) const {
    std::lock_guard lock(mutex_);
    if (slot >= cluster_slots || !slots_[slot]) return std::nullopt;
    return slots_[slot]->address;
}

std::vector<ServerAddress> ClusterRouter::masters() const {
    std::lock_guard lock(mutex_);
    std::vector<ServerAddress> out;
    const Node* last = nullptr;
    for (auto* node : slots_) {
        if (!node || node == last) continue;
        last = node;
        bool seen = false;
        for (auto& address : out) seen |= address.host == node->address.host && address.port == node->address.port;
        if (!seen) out.push_back(node->address);
    }
    return out;
}

ClusterRouter::Counts ClusterRouter::counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
}

std::size_t ClusterRouter::node_count() const {
    std::lock_guard lock(mutex_);
    return nodes_.size();
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

bool ClusterRouter::shut_down() const {
    std::lock_guard lock(mutex_);
    return shut_down_;
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
