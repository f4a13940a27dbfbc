#include <charconv>

#include "cluster_router_internal.hpp"
#include "command_format.hpp"
#include "reported_address.hpp"
#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

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

}  // namespace dlock::detail
